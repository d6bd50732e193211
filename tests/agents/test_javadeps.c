/* SPDX-License-Identifier: MIT */
/* tests/agents/test_javadeps.c - the unresolved Java plugin or artifact named in a build's
 * output (agents/javadeps.h): Maven's plugin and dependency errors, the repository host it
 * tried, Gradle's plugin error, and output that names nothing. */
#include "agents/javadeps.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Maven 3.9 with no network, a plugin version Debian does not package. */
static const char MAVEN_PLUGIN[] =
    "[INFO] Scanning for projects...\n"
    "[INFO] --------------------------< example:jcalc >---------------------------\n"
    "[INFO] BUILD FAILURE\n"
    "[ERROR] Plugin org.apache.maven.plugins:maven-surefire-plugin:3.2.5 or one of its "
    "dependencies could not be resolved:\n"
    "[ERROR] \tThe following artifacts could not be resolved: "
    "org.apache.maven.plugins:maven-surefire-plugin:jar:3.2.5 (absent): Could not transfer "
    "artifact org.apache.maven.plugins:maven-surefire-plugin:jar:3.2.5 from/to central "
    "(https://maven.example.org/maven2): maven.example.org: Temporary failure in name "
    "resolution\n";

static const char MAVEN_DEPENDENCY[] =
    "[ERROR] Failed to execute goal on project jcalc: Could not resolve dependencies for "
    "project example:jcalc:jar:1.0\n"
    "[ERROR] dependency: org.example:absent-lib:jar:2.1 (test)\n"
    "[ERROR] \tThe following artifacts could not be resolved: org.example:absent-lib:jar:2.1 "
    "(absent): Cannot access central (https://repo.example.net/maven2) in offline mode\n";

static const char GRADLE_PLUGIN[] =
    "FAILURE: Build failed with an exception.\n"
    "* What went wrong:\n"
    "Plugin [id: 'org.example.lint', version: '1.4'] was not found in any of the following "
    "sources:\n";

static void test_maven_plugin_and_host(void **state)
{
	char *s = NULL;

	(void)state;
	assert_int_equal(javadeps_hint(MAVEN_PLUGIN, &s), 0);
	assert_non_null(s);
	assert_non_null(strstr(s, "The build could not resolve the Maven plugin "
				  "org.apache.maven.plugins:maven-surefire-plugin:3.2.5: it is not "
				  "in Debian's packaged Maven repository (/usr/share/maven-repo)"));
	assert_non_null(strstr(s, "with `maven.example.org:443` in `network:` in "
				  ".github/autopatch.yml."));
	free(s);
}

static void test_maven_dependency_offline(void **state)
{
	char *s = NULL;

	(void)state;
	assert_int_equal(javadeps_hint(MAVEN_DEPENDENCY, &s), 0);
	assert_non_null(s);
	assert_non_null(
	    strstr(s, "could not resolve the artifact org.example:absent-lib:jar:2.1:"));
	assert_non_null(strstr(s, "`repo.example.net:443`"));
	free(s);
}

static void test_gradle_plugin_without_host(void **state)
{
	char *s = NULL;

	(void)state;
	assert_int_equal(javadeps_hint(GRADLE_PLUGIN, &s), 0);
	assert_non_null(s);
	assert_non_null(strstr(s, "the Gradle plugin [id: 'org.example.lint', version: '1.4']:"));
	assert_non_null(strstr(s, "with the host of the repository that serves it in `network:`"));
	free(s);
}

static void test_nothing_unresolved(void **state)
{
	char *s = (char *)"x";

	(void)state;
	assert_int_equal(javadeps_hint("[ERROR] Tests run: 2, Failures: 1\nBUILD FAILURE\n", &s),
			 0);
	assert_null(s);
	assert_int_equal(javadeps_hint(NULL, &s), 0);
	assert_null(s);
	/* "Plugin" without "could not be resolved" on its line is not a failure. */
	assert_int_equal(javadeps_hint("[INFO] Plugin a:b:1 loaded\n", &s), 0);
	assert_null(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_maven_plugin_and_host),
	    cmocka_unit_test(test_maven_dependency_offline),
	    cmocka_unit_test(test_gradle_plugin_without_host),
	    cmocka_unit_test(test_nothing_unresolved),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
