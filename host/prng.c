/*
 * prng.c: xoshiro256** and a stable byte hash.
 */
#include "prng.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

void eu_prng_seed(eu_prng *r, uint64_t seed) {
  int i;
  for (i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

uint64_t eu_prng_next(eu_prng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

uint64_t eu_prng_below(eu_prng *r, uint64_t n) {
  /* rejection sampling: drop the top partial block so every value is equally likely */
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = eu_prng_next(r); while (x >= limit);
  return x % n;
}

double eu_prng_double(eu_prng *r) {
  return (double)(eu_prng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t eu_hash64(const void *p, size_t n, uint64_t seed) {
  const unsigned char *c = p;
  uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  size_t i;
  for (i = 0; i < n; i++) {
    h ^= c[i];
    h *= 0x100000001b3ULL;
  }
  return splitmix64(&h);
}
