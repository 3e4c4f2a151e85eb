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
/* Two 64-bit values into one, well mixed (splitmix64's finaliser over a
 * boost-style combine): for hashes built of parts. */
static inline uint64_t eu_mix64(uint64_t a, uint64_t b) {
  uint64_t z = a ^ (b + 0x9e3779b97f4a7c15u + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

#endif
