# Makes calc importable from tests/ when pytest runs from the project root.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
