"""calc - a tiny statistics calculator used as autopatch's worked example.

Usage: python3 calc.py mean|median|total [NUMBER ...]
"""
import sys


def total(values):
    """Sum of the values (0 for no values)."""
    result = 0
    for v in values:
        result += v
    return result


def mean(values):
    """Arithmetic mean of the values."""
    return total(values) / len(values)


def median(values):
    """Middle value of the sorted values (mean of the two middle ones for an even count)."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median of no values")
    mid = n // 2
    if n % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def main(argv):
    if len(argv) < 2 or argv[1] not in ("mean", "median", "total"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    values = [float(a) for a in argv[2:]]
    print(globals()[argv[1]](values))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
