/*
 * prng.h: the one source of randomness in a world.
 *
 * xoshiro256** seeded through splitmix64, so a run's seed fixes every draw:
 * math.random, eutaxy.uuid(), newUniqueId, the random chooser and jitter.
 * Never seeded from the clock or the address space.
 */
#ifndef EUTAXY_PRNG_H
#define EUTAXY_PRNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct eu_prng { uint64_t s[4]; } eu_prng;

void eu_prng_seed(eu_prng *r, uint64_t seed);
uint64_t eu_prng_next(eu_prng *r);
/* Uniform in [0, n) without modulo bias; n > 0. */
uint64_t eu_prng_below(eu_prng *r, uint64_t n);
/* Uniform double in [0, 1). */
double eu_prng_double(eu_prng *r);
/* A stable 64-bit hash of bytes (FNV-1a then a splitmix finaliser), for seeds and ids. */
uint64_t eu_hash64(const void *p, size_t n, uint64_t seed);

#endif
