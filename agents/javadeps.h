/* SPDX-License-Identifier: MIT */
/* agents/javadeps.h - what a Java build could not resolve. The java flavour resolves Maven
 * plugins and libraries from Debian's packaged repository (/usr/share/maven-repo) with no
 * network; when one is not there, Maven's (or Gradle's) output says so in a long error. This
 * reads that output and says, in one sentence, which plugin or artifact is missing and what
 * would fetch it (the `network:` entry of the repository it was looked for at), so the
 * Tester's baseline can end the job with it before any model call. */
#ifndef AP_AGENTS_JAVADEPS_H
#define AP_AGENTS_JAVADEPS_H

/* The sentence for the first unresolved plugin, parent POM, extension or dependency in output
 * (Maven's "Plugin G:A:V or one of its dependencies could not be resolved", "The following
 * artifacts could not be resolved: G:A:jar:V", Gradle's "Plugin [id: 'X', version: 'V'] was
 * not found"), with the host of the repository it was looked for at when the output names one
 * ("from/to central (https://HOST/...)", "Cannot access central (https://HOST/...)").
 * Only the first 4 MiB of output are read. Returns 0 with *out NULL when there is none, 0 with
 * *out malloc'd, or AP_ENOMEM. */
int javadeps_hint(const char *output, char **out);

#endif
