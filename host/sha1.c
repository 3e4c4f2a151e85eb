/*
 * sha1.c: SHA-1 as FIPS 180-4 specifies it (sha1.h).
 *
 * The message is padded with a 1 bit, zeros and its length in bits as a
 * 64-bit big-endian number, to a multiple of 64 bytes (5.1.1); each block
 * is expanded to 80 words and mixed into the five-word state in 80 steps
 * (6.1.2), with the functions and constants of 4.1.1 and 4.2.1. The input
 * is read block by block straight from the caller's bytes; only the padded
 * tail is copied.
 */
#include <stdint.h>
#include <string.h>

#include "sha1.h"

static uint32_t rotl(uint32_t x, int n) {
  return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const unsigned char *b) {
  uint32_t w[80], a, bb, c, d, e;
  int t;
  for (t = 0; t < 16; t++)
    w[t] = (uint32_t)b[4 * t] << 24 | (uint32_t)b[4 * t + 1] << 16 | (uint32_t)b[4 * t + 2] << 8 |
           (uint32_t)b[4 * t + 3];
  for (t = 16; t < 80; t++) w[t] = rotl(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
  a = h[0];
  bb = h[1];
  c = h[2];
  d = h[3];
  e = h[4];
  for (t = 0; t < 80; t++) {
    uint32_t f, k, tmp;
    if (t < 20) {
      f = (bb & c) ^ (~bb & d);  /* Ch */
      k = 0x5a827999;
    } else if (t < 40) {
      f = bb ^ c ^ d;            /* Parity */
      k = 0x6ed9eba1;
    } else if (t < 60) {
      f = (bb & c) ^ (bb & d) ^ (c & d);  /* Maj */
      k = 0x8f1bbcdc;
    } else {
      f = bb ^ c ^ d;
      k = 0xca62c1d6;
    }
    tmp = rotl(a, 5) + f + e + k + w[t];
    e = d;
    d = c;
    c = rotl(bb, 30);
    bb = a;
    a = tmp;
  }
  h[0] += a;
  h[1] += bb;
  h[2] += c;
  h[3] += d;
  h[4] += e;
}

void eu_sha1(const void *p, size_t n, unsigned char out[EU_SHA1_LEN]) {
  const unsigned char *s = p;
  uint32_t h[5] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0 };  /* 5.3.1 */
  unsigned char tail[128];
  uint64_t bits = (uint64_t)n * 8;
  size_t rest = n % 64, full = n - rest, len, i;
  for (i = 0; i < full; i += 64) sha1_block(h, s + i);
  /* the last bytes, 0x80, zeros and the length: one block, or two when
   * fewer than 9 bytes are left for the 0x80 and the length */
  len = rest < 56 ? 64 : 128;
  memset(tail, 0, sizeof tail);
  if (rest) memcpy(tail, s + full, rest);
  tail[rest] = 0x80;
  for (i = 0; i < 8; i++) tail[len - 1 - i] = (unsigned char)(bits >> (8 * i));
  for (i = 0; i < len; i += 64) sha1_block(h, tail + i);
  for (i = 0; i < 5; i++) {
    out[4 * i] = (unsigned char)(h[i] >> 24);
    out[4 * i + 1] = (unsigned char)(h[i] >> 16);
    out[4 * i + 2] = (unsigned char)(h[i] >> 8);
    out[4 * i + 3] = (unsigned char)h[i];
  }
}
