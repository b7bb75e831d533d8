// SPDX-License-Identifier: MIT
// engine_int: helpers shared by the engine's own files (not for other modules).
#pragma once

#include "sampling/sampling.h"

#include <stddef.h>
#include <stdint.h>

// Longest suffix of held[0..n) that is a proper prefix of one of sp's stop strings: text that
// must wait for the next token before it can be released.
size_t gl_stop_holdback(const struct gl_sample_params *sp, const char *held, size_t n);
// Index of the stop string that occurs earliest in held[0..n) (ties: the longer one), *at its
// byte offset; -1 if none occurs.
int32_t gl_stop_match(const struct gl_sample_params *sp, const char *held, size_t n, size_t *at);
