/*
 * eutaxy.h: what every part of the host shares.
 *
 * Functions of the host return 0 (EU_OK) or a negative EU_E* code and, where
 * a caller will want to show why, write a message into an error buffer the
 * caller gives them (char *err, size_t errlen). Nothing in the host aborts
 * or exits on bad input.
 */
#ifndef EUTAXY_H
#define EUTAXY_H

#include <stddef.h>
#include <stdint.h>

#define EU_VERSION "0.1.0"

enum {
  EU_OK = 0,
  EU_ENOMEM = -1,   /* an allocation failed */
  EU_EINVAL = -2,   /* misuse or bad input; the message says which */
  EU_ECLONE = -3,   /* a value that cannot cross between isolates */
  EU_ESQL = -4,     /* SQLite refused; the message carries its text */
  EU_ELUA = -5,     /* user Lua code raised */
  EU_ECORRUPT = -6, /* a serialized value or schedule that does not decode */
  EU_ENONDET = -7,  /* two runs of one schedule differed */
  EU_EFULL = -8     /* an object's database reached its size limit, or the disk is full */
};

/* Size of the error buffers the host passes around. */
#define EU_ERRLEN 512

/* Writes a formatted message into err (if err is not NULL) and returns code. */
int eu_err(char *err, size_t errlen, int code, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 4, 5)))
#endif
  ;

/* The environment variable name as a whole number from least to most, in
 * *v (unset or empty: *v stays): EU_OK, or EU_EINVAL with a message that
 * names the variable and what it holds. */
int eu_env_int(const char *name, int64_t least, int64_t most, int64_t *v, char *err, size_t errlen);

#endif
