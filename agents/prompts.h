/* SPDX-License-Identifier: MIT */
/* agents/prompts.h - the role prompts, compiled from the Markdown files in agents/prompts at build
 * time. */
#ifndef AP_PROMPTS_H
#define AP_PROMPTS_H

extern const char prompt_planner[];
extern const char prompt_builder[];

#endif
