/*
 * clone.c: the encoding that carries values between isolates.
 *
 * Owns the byte format below, the order of keys (eu_keycmp), and the
 * readable rendering of encoded values that traces show. It touches a
 * lua_State only through the raw API, so no metamethod ever runs. Encoding
 * allocates nothing inside Lua and so cannot raise a Lua error: it is safe
 * outside a protected call. Decoding pushes strings and tables, which can
 * raise only a memory error.
 *
 * Format. A list of values is a varint count followed by the values. A
 * value is one tag byte and its payload:
 *
 *   0x00 nil
 *   0x01 false
 *   0x02 true
 *   0x03 integer   zigzag varint
 *   0x04 float     8 bytes, IEEE 754 binary64, little-endian: NaN, the
 *                  infinities and -0.0 come back bit for bit
 *   0x05 string    varint length, then the bytes
 *   0x06 table     varint count of pairs, then key, value, key, value, ...
 *                  keys strictly increasing in eu_keycmp order
 *   0x07 id        an object's id (a table of the state's id class): its
 *                  binding, a string of 1 to 255 bytes and no NUL; its hex,
 *                  a string of 64 lowercase hex digits; its name, a string,
 *                  or nil for an id made without one
 *
 * A varint is unsigned LEB128 in its shortest form (no redundant last byte
 * of zero), at most 10 bytes. Keys are booleans, numbers or strings; a
 * value in a table is never nil; a float key never holds an integral value
 * that fits an integer (Lua stores such keys as integers).
 * So the encoding is canonical: one value, one byte string, in any process.
 * The decoder checks every one of these rules and trusts no length.
 *
 * Tables met again below themselves are cycles and refused; the same table
 * met twice elsewhere (a DAG) is simply written twice.
 *
 * An id is told by its metatable alone, never by its shape, so no plain
 * table becomes one on the way. Its fields are checked where it is written
 * and again where it is read, by the state's id check when it has one (the
 * world's: the name must give the hex), so user code cannot make an id
 * cross that its world would not have made.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clone.h"
#include "eutaxy.h"

enum { TAG_NIL, TAG_FALSE, TAG_TRUE, TAG_INT, TAG_FLOAT, TAG_STRING, TAG_TABLE, TAG_ID };

/* What rd_item reports for an id: no Lua type, so no key can be one. */
#define TYPE_ID 100
#define ID_BINDING_MAX 255

static const char id_class_key = 0;  /* registry: the state's id class */
static const char id_check_key = 0;  /* registry: a userdata holding its id check */

typedef struct id_check_box {
  eu_clone_id_check check;
} id_check_box;

/* Past this many bytes an error's path ends with "...". */
#define PATH_MAX_BYTES 100
/* Bytes of a string key that an error's path shows. */
#define PATH_KEY_BYTES 32

/*
 * Keys and their order.
 */

void eu_key_describe(lua_State *L, int idx, eu_key *k) {
  k->type = lua_type(L, idx);
  k->isint = 0;
  k->i = 0;
  k->f = 0;
  k->s = NULL;
  k->len = 0;
  k->ref = NULL;
  switch (k->type) {
    case LUA_TNONE: case LUA_TNIL: break;
    case LUA_TBOOLEAN: k->i = lua_toboolean(L, idx); break;
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) {
        k->isint = 1;
        k->i = lua_tointeger(L, idx);
      }
      else k->f = lua_tonumber(L, idx);
      break;
    case LUA_TSTRING: k->s = lua_tolstring(L, idx, &k->len); break;
    default: k->ref = lua_topointer(L, idx); break;
  }
}

/* numbers, strings, booleans, then the rest by type number (none and nil first) */
static int key_rank(int type) {
  switch (type) {
    case LUA_TNUMBER: return 0;
    case LUA_TSTRING: return 1;
    case LUA_TBOOLEAN: return 2;
    default: return 4 + type;  /* LUA_TNONE is -1 */
  }
}

/* NaN is never a key, but eu_keycmp may see one: it goes after every number. */
static int cmp_float(lua_Number a, lua_Number b) {
  int na = isnan(a) != 0, nb = isnan(b) != 0;
  if (na || nb) return na - nb;
  return (a > b) - (a < b);
}

/* Exact comparison of an integer with a float: converting either to the
 * other's type loses precision past 2^53, so compare with floor(f) instead. */
static int cmp_int_float(lua_Integer i, lua_Number f) {
  lua_Number fl;
  lua_Integer fi;
  if (isnan(f)) return -1;
  if (f >= 0x1p63) return -1;
  if (f < -0x1p63) return 1;
  fl = floor(f);
  fi = (lua_Integer)fl;  /* -2^63 <= fl < 2^63: exact */
  if (i != fi) return i < fi ? -1 : 1;
  return fl == f ? 0 : -1;
}

int eu_key_cmp(const eu_key *a, const eu_key *b) {
  int ra = key_rank(a->type), rb = key_rank(b->type), c;
  size_t n;
  if (ra != rb) return ra < rb ? -1 : 1;
  switch (a->type) {
    case LUA_TNUMBER:
      if (a->isint && b->isint) return (a->i > b->i) - (a->i < b->i);
      if (a->isint) {  /* equal values: the integer first, so the order is total */
        c = cmp_int_float(a->i, b->f);
        return c ? c : -1;
      }
      if (b->isint) {
        c = cmp_int_float(b->i, a->f);
        return c ? -c : 1;
      }
      return cmp_float(a->f, b->f);
    case LUA_TSTRING:
      n = a->len < b->len ? a->len : b->len;
      c = n ? memcmp(a->s, b->s, n) : 0;
      if (c) return c < 0 ? -1 : 1;
      return (a->len > b->len) - (a->len < b->len);
    case LUA_TBOOLEAN:
      return (a->i > b->i) - (a->i < b->i);
    default:
      return 0;  /* references have no content to order by */
  }
}

int eu_keycmp(lua_State *L, int a, int b) {
  eu_key ka, kb;
  eu_key_describe(L, a, &ka);
  eu_key_describe(L, b, &kb);
  return eu_key_cmp(&ka, &kb);
}

static int key_sort_cmp(const void *pa, const void *pb) {
  const eu_key *a = pa, *b = pb;
  int c = eu_key_cmp(a, b);
  if (c == 0 && a->ref != b->ref)  /* per-process only, as clone.h says */
    c = (uintptr_t)a->ref < (uintptr_t)b->ref ? -1 : 1;
  return c;
}

void eu_key_sort(eu_key *keys, size_t n) {
  if (n > 1) qsort(keys, n, sizeof *keys, key_sort_cmp);
}

/*
 * Rendering pieces shared by error paths and eu_clone_format.
 */

/* Shortest of %.15g..%.17g that reads back as the same double, with ".0"
 * added to integral values so 2.0 never reads as the integer 2. */
static void fmt_float(char *out, size_t outlen, double f) {
  int prec;
  char *c;
  if (isnan(f)) { snprintf(out, outlen, "0/0"); return; }
  if (isinf(f)) { snprintf(out, outlen, f > 0 ? "1/0" : "-1/0"); return; }
  for (prec = 15; prec <= 17; prec++) {
    snprintf(out, outlen, "%.*g", prec, f);
    if (strtod(out, NULL) == f) break;  /* parsed in the same locale as printed */
  }
  for (c = out; *c; c++)  /* whatever the locale's decimal point, write '.' */
    if (!strchr("0123456789+-eE", *c)) *c = '.';
  if (!strpbrk(out, ".eE") && strlen(out) + 3 <= outlen) strcat(out, ".0");
}

static int is_ident(const char *s, size_t len) {
  static const char *const reserved[] = {
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function",
    "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then",
    "true", "until", "while", NULL
  };
  size_t i;
  int r;
  if (len == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
      return 0;
  }
  for (r = 0; reserved[r]; r++)
    if (strlen(reserved[r]) == len && memcmp(reserved[r], s, len) == 0) return 0;
  return 1;
}

/* A Lua string literal of the first max bytes of s, with "..." inside the
 * quotes when s is longer. */
static int put_quoted(eu_buf *b, const char *s, size_t len, size_t max) {
  size_t i, n = len < max ? len : max;
  int rc = eu_buf_putc(b, '"');
  for (i = 0; i < n && rc == EU_OK; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      char e[2] = { '\\', (char)c };
      rc = eu_buf_put(b, e, 2);
    }
    else if (c == '\n') rc = eu_buf_puts(b, "\\n");
    else if (c == '\r') rc = eu_buf_puts(b, "\\r");
    else if (c == '\t') rc = eu_buf_puts(b, "\\t");
    else if (c < 0x20 || c == 0x7f) {
      /* three digits when a digit follows, so "\0" "1" never reads as "\01" */
      int digit_next = i + 1 < len && s[i + 1] >= '0' && s[i + 1] <= '9';
      rc = eu_buf_printf(b, digit_next ? "\\%03d" : "\\%d", c);
    }
    else rc = eu_buf_putc(b, (char)c);
  }
  if (rc == EU_OK && len > max) rc = eu_buf_puts(b, "...");
  if (rc == EU_OK) rc = eu_buf_putc(b, '"');
  return rc;
}

/* A key as Lua would subscript with it: [1], [1.5], [true], ["odd key"]. */
static int put_subscript(eu_buf *b, const eu_key *k, size_t maxstr) {
  char num[64];
  int rc;
  switch (k->type) {
    case LUA_TNUMBER:
      if (k->isint) return eu_buf_printf(b, "[%" PRId64 "]", (int64_t)k->i);
      fmt_float(num, sizeof num, k->f);
      return eu_buf_printf(b, "[%s]", num);
    case LUA_TBOOLEAN:
      return eu_buf_puts(b, k->i ? "[true]" : "[false]");
    case LUA_TSTRING:
      rc = eu_buf_putc(b, '[');
      if (rc == EU_OK) rc = put_quoted(b, k->s, k->len, maxstr);
      if (rc == EU_OK) rc = eu_buf_putc(b, ']');
      return rc;
    default:
      return eu_buf_printf(b, "[%s]", k->type == LUA_TNIL ? "nil" : "?");
  }
}

/*
 * Ids.
 */

void eu_clone_set_id_class(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_pushvalue(L, idx);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &id_class_key);
}

void eu_clone_set_id_check(lua_State *L, eu_clone_id_check check) {
  id_check_box *box = lua_newuserdatauv(L, sizeof *box, 0);
  box->check = check;
  lua_rawsetp(L, LUA_REGISTRYINDEX, &id_check_key);
}

/* Why the parts of an id (binding, hex, name) are no id's, or NULL. */
static const char *id_malformed(const eu_key *part) {
  size_t i;
  if (part[0].type != LUA_TSTRING || part[0].len == 0 || part[0].len > ID_BINDING_MAX ||
      memchr(part[0].s, 0, part[0].len))
    return "its binding is no binding's name";
  if (part[1].type != LUA_TSTRING || part[1].len != 64) return "its hex is not 64 lowercase hex digits";
  for (i = 0; i < 64; i++) {
    char c = part[1].s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return "its hex is not 64 lowercase hex digits";
  }
  if (part[2].type != LUA_TNIL && part[2].type != LUA_TSTRING) return "its name is not a string";
  return NULL;
}

/* The state's id check on well-formed parts: 0, or nonzero with why set. */
static int id_checked(lua_State *L, const eu_key *part, char *why, size_t whylen) {
  char binding[ID_BINDING_MAX + 1], hex[65];
  id_check_box *box;
  if (!lua_checkstack(L, 1)) {
    snprintf(why, whylen, "out of memory");
    return 1;
  }
  lua_rawgetp(L, LUA_REGISTRYINDEX, &id_check_key);
  box = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (!box || !box->check) return 0;
  memcpy(binding, part[0].s, part[0].len);
  binding[part[0].len] = '\0';
  memcpy(hex, part[1].s, 64);
  hex[64] = '\0';
  return box->check(L, binding, hex, part[2].type == LUA_TSTRING ? part[2].s : NULL, part[2].len, why, whylen);
}

/* 1 if the table at idx has the state's id class, 0 if not, -1 out of stack. */
static int is_id(lua_State *L, int idx) {
  int yes;
  if (!lua_checkstack(L, 2)) return -1;
  if (!lua_getmetatable(L, idx)) return 0;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &id_class_key);
  yes = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return yes;
}

/*
 * Encoding.
 */

typedef struct entry { eu_key k, v; } entry;

typedef struct enc {
  lua_State *L;
  eu_buf *b;
  char *err;
  size_t errlen;
  size_t start;                               /* where the encoding began in b */
  eu_key top;                                 /* the position of the top-level value, as a key */
  const eu_key *path[EU_CLONE_MAXDEPTH + 1];  /* keys from the top to the value being written */
  const void *open[EU_CLONE_MAXDEPTH];        /* tables being written, outermost first */
  int nopen;
} enc;

/* Writes "what (at [1].a["b c"])" into the caller's buffer. */
static int refuse(enc *e, int plen, int code, const char *what) {
  eu_buf p;
  int i, rc = EU_OK;
  eu_buf_init(&p);
  for (i = 0; i < plen && rc == EU_OK; i++) {
    const eu_key *k = e->path[i];
    if (p.n > PATH_MAX_BYTES) {
      rc = eu_buf_puts(&p, "...");
      break;
    }
    if (k->type == LUA_TSTRING && k->len <= PATH_KEY_BYTES && is_ident(k->s, k->len))
      rc = eu_buf_printf(&p, ".%.*s", (int)k->len, k->s);
    else
      rc = put_subscript(&p, k, PATH_KEY_BYTES);
  }
  if (rc == EU_OK && p.p)
    eu_err(e->err, e->errlen, code, "%s (at %s)", what, p.p);
  else
    eu_err(e->err, e->errlen, code, "%s", what);
  eu_buf_free(&p);
  return code;
}

static int nomem(enc *e) {
  return eu_err(e->err, e->errlen, EU_ENOMEM, "out of memory while cloning a value");
}

static int put_float(eu_buf *b, lua_Number f) {
  unsigned char bytes[9];
  uint64_t u;
  double d = (double)f;
  int i;
  memcpy(&u, &d, 8);
  bytes[0] = TAG_FLOAT;
  for (i = 0; i < 8; i++) bytes[1 + i] = (unsigned char)(u >> (8 * i));
  return eu_buf_put(b, bytes, 9);
}

/* nil, booleans, numbers, strings; anything else is the caller's business.
 * The bytes of eu_buf_putc, eu_buf_puti and eu_buf_putu, with one reserve. */
static int put_scalar(eu_buf *b, const eu_key *k) {
  char *p;
  switch (k->type) {
    case LUA_TNIL: return eu_buf_putc(b, TAG_NIL);
    case LUA_TBOOLEAN: return eu_buf_putc(b, k->i ? TAG_TRUE : TAG_FALSE);
    case LUA_TNUMBER:
      if (!k->isint) return put_float(b, k->f);
      if (eu_buf_reserve(b, 1 + EU_VARINT_MAX) != EU_OK) return EU_ENOMEM;
      p = b->p + b->n;
      *p++ = TAG_INT;
      p = eu_varint(p, eu_zigzag((int64_t)k->i));
      break;
    case LUA_TSTRING:
      if (k->len > SIZE_MAX - 1 - EU_VARINT_MAX || eu_buf_reserve(b, 1 + EU_VARINT_MAX + k->len) != EU_OK)
        return EU_ENOMEM;
      p = b->p + b->n;
      *p++ = TAG_STRING;
      p = eu_varint(p, k->len);
      if (k->len) memcpy(p, k->s, k->len);
      p += k->len;
      break;
    default: return EU_EINVAL;
  }
  b->n = (size_t)(p - b->p);
  *p = '\0';
  return EU_OK;
}

static const char *type_noun(int type) {
  switch (type) {
    case LUA_TLIGHTUSERDATA: return "light userdata";
    case LUA_TTABLE: return "table";
    case LUA_TFUNCTION: return "function";
    case LUA_TUSERDATA: return "userdata";
    case LUA_TTHREAD: return "thread";
    default: return "value of unknown type";
  }
}

static int encode_value(enc *e, const eu_key *v, int plen);

static int entry_cmp(const void *pa, const void *pb) {
  return eu_key_cmp(&((const entry *)pa)->k, &((const entry *)pb)->k);
}

/* The n entries in key order: for the few most tables hold, their indices
 * in order (an insertion sort); beyond 16, the entries themselves sorted in
 * place. Only keys that cannot be cloned compare equal, and which of them
 * comes first changes no message. */
static void sort_entries(entry *es, size_t n, unsigned char *order) {
  size_t i, j;
  if (n > 16) {
    qsort(es, n, sizeof *es, entry_cmp);
    return;
  }
  for (i = 0; i < n; i++) {
    unsigned char x = (unsigned char)i;
    for (j = i; j > 0 && eu_key_cmp(&es[order[j - 1]].k, &es[x].k) > 0; j--) order[j] = order[j - 1];
    order[j] = x;
  }
}

/* The table at stack index v->pos, whose path has plen keys. Walks it once
 * with lua_next, describing each pair; a value that is itself a table stays
 * on the stack (below the iteration key) until it is written. */
static int encode_table(enc *e, const eu_key *v, int plen) {
  lua_State *L = e->L;
  int t = (int)v->pos, top = lua_gettop(L), i, rc = EU_OK;
  entry small[8];  /* most tables are small: no malloc for them */
  entry *es = small;
  unsigned char order[16];  /* es's indices in key order, when there are at most 16 */
  size_t n = 0, cap = sizeof small / sizeof small[0], j;
  char what[64];
  for (i = 0; i < e->nopen; i++)
    if (e->open[i] == v->ref) return refuse(e, plen, EU_ECLONE, "cannot clone a cycle");
  if (plen > EU_CLONE_MAXDEPTH) {
    snprintf(what, sizeof what, "value nests deeper than %d levels", EU_CLONE_MAXDEPTH);
    return refuse(e, plen, EU_ECLONE, what);
  }
  if (!lua_checkstack(L, 3)) return nomem(e);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    entry *en;
    if (n == cap) {
      size_t ncap = cap * 2;
      entry *nes = ncap <= SIZE_MAX / sizeof *es ? realloc(es == small ? NULL : es, ncap * sizeof *es) : NULL;
      if (!nes) { rc = nomem(e); goto done; }
      if (es == small) memcpy(nes, small, sizeof small);
      es = nes;
      cap = ncap;
    }
    en = &es[n++];
    eu_key_describe(L, -2, &en->k);  /* strings stay valid: t holds them */
    eu_key_describe(L, -1, &en->v);
    if (en->v.type == LUA_TTABLE) {
      lua_rotate(L, -2, 1);  /* keep the value under the key */
      en->v.pos = (size_t)lua_gettop(L) - 1;
      if (!lua_checkstack(L, 3)) { rc = nomem(e); goto done; }
    }
    else lua_pop(L, 1);
  }
  sort_entries(es, n, order);
  e->open[e->nopen++] = v->ref;
  rc = eu_buf_putc(e->b, TAG_TABLE);
  if (rc == EU_OK) rc = eu_buf_putu(e->b, n);
  if (rc != EU_OK) rc = nomem(e);
  for (j = 0; j < n && rc == EU_OK; j++) {
    const entry *en = &es[n > 16 ? j : order[j]];
    const eu_key *k = &en->k;
    if (k->type != LUA_TNUMBER && k->type != LUA_TSTRING && k->type != LUA_TBOOLEAN) {
      /* sorted after every valid key, so which bad key is named is fixed */
      snprintf(what, sizeof what, "cannot clone a %s key", type_noun(k->type));
      rc = refuse(e, plen, EU_ECLONE, what);
      break;
    }
    e->path[plen] = k;
    if (put_scalar(e->b, k) != EU_OK) rc = nomem(e);
    else rc = encode_value(e, &en->v, plen + 1);
  }
  e->nopen--;
done:
  if (es != small) free(es);
  lua_settop(L, top);
  return rc;
}

/* The id at stack index v->pos: its three fields, read raw, and checked. */
static int encode_id(enc *e, const eu_key *v, int plen) {
  static const char *const fields[3] = { "binding", "hex", "name" };
  lua_State *L = e->L;
  int t = (int)v->pos, top = lua_gettop(L), i, rc;
  eu_key part[3];
  const char *bad;
  char why[160], what[220];
  memset(part, 0, sizeof part);
  for (i = 0; i < 3; i++) part[i].type = LUA_TNIL;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) == LUA_TSTRING) {
      size_t len;
      const char *k = lua_tolstring(L, -2, &len);
      for (i = 0; i < 3; i++)
        if (strlen(fields[i]) == len && memcmp(fields[i], k, len) == 0) eu_key_describe(L, -1, &part[i]);
    }
    lua_pop(L, 1);
  }
  lua_settop(L, top);  /* the strings stay reachable: the id holds them */
  if ((bad = id_malformed(part)) != NULL) {
    snprintf(what, sizeof what, "cannot clone an id that is no id: %s", bad);
    return refuse(e, plen, EU_ECLONE, what);
  }
  if (id_checked(L, part, why, sizeof why)) {
    snprintf(what, sizeof what, "cannot clone an id its world did not make: %s", why);
    return refuse(e, plen, EU_ECLONE, what);
  }
  rc = eu_buf_putc(e->b, TAG_ID);
  for (i = 0; i < 3 && rc == EU_OK; i++) rc = put_scalar(e->b, &part[i]);
  return rc == EU_OK ? EU_OK : nomem(e);
}

static int encode_value(enc *e, const eu_key *v, int plen) {
  char what[64];
  int rc;
  switch (v->type) {
    case LUA_TNIL: case LUA_TBOOLEAN: case LUA_TNUMBER: case LUA_TSTRING:
      rc = put_scalar(e->b, v) == EU_OK ? EU_OK : nomem(e);
      break;
    case LUA_TTABLE:
      rc = is_id(e->L, (int)v->pos);
      if (rc < 0) rc = nomem(e);
      else if (rc) rc = encode_id(e, v, plen);
      else rc = encode_table(e, v, plen);
      break;
    default:
      snprintf(what, sizeof what, "cannot clone a %s", type_noun(v->type));
      return refuse(e, plen, EU_ECLONE, what);
  }
  /* checked after every value, so the bytes written stay near the limit */
  if (rc == EU_OK && e->b->n - e->start > (size_t)EU_CLONE_MAXBYTES) {
    snprintf(what, sizeof what, "value too large to clone: more than %zu MiB encoded",
             (size_t)EU_CLONE_MAXBYTES >> 20);
    return refuse(e, plen, EU_ECLONE, what);
  }
  return rc;
}

int eu_clone_encode(lua_State *L, int idx, int n, eu_buf *b, char *err, size_t errlen) {
  enc e;
  size_t start = b->n;
  int i, rc;
  if (n < 0) return eu_err(err, errlen, EU_EINVAL, "negative count of values to clone");
  if (n > 0) idx = lua_absindex(L, idx);
  e.L = L;
  e.b = b;
  e.start = start;
  e.err = err;
  e.errlen = errlen;
  e.nopen = 0;
  e.top.type = LUA_TNUMBER;
  e.top.isint = 1;
  e.top.s = NULL;
  e.top.len = 0;
  e.top.ref = NULL;
  e.top.f = 0;
  e.path[0] = &e.top;
  rc = eu_buf_putu(b, (uint64_t)n) == EU_OK ? EU_OK : nomem(&e);
  for (i = 0; i < n && rc == EU_OK; i++) {
    eu_key v;
    eu_key_describe(L, idx + i, &v);
    v.pos = (size_t)(idx + i);
    e.top.i = i + 1;
    rc = encode_value(&e, &v, 1);
  }
  if (rc != EU_OK) {  /* leave b as it was */
    b->n = start;
    if (b->p) b->p[start] = '\0';
  }
  return rc;
}

typedef struct bytes {
  const char *p;
  size_t n;
} bytes;

static int push_bytes_p(lua_State *L) {
  bytes *x = lua_touserdata(L, 1);
  lua_pushlstring(L, x->p, x->n);
  return 1;
}

int eu_clone_push_encoded(lua_State *L, int idx, char *err, size_t errlen) {
  eu_buf b;
  bytes x;
  int rc;
  idx = lua_absindex(L, idx);
  if (!lua_checkstack(L, 2)) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  eu_buf_init(&b);
  rc = eu_clone_encode(L, idx, 1, &b, err, errlen);
  if (rc != EU_OK) {
    eu_buf_free(&b);
    return rc;
  }
  /* lua_pushlstring raises when out of memory, and b must not leak then. */
  x.p = b.p;
  x.n = b.n;
  lua_pushcfunction(L, push_bytes_p);
  lua_pushlightuserdata(L, &x);
  rc = lua_pcall(L, 1, 1, 0);
  eu_buf_free(&b);
  if (rc != LUA_OK) {
    lua_pop(L, 1);
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  return EU_OK;
}

/*
 * Reading encoded bytes, for decode and format alike.
 */

typedef struct rd {
  const unsigned char *p, *end, *start;
  char *err;
  size_t errlen;
} rd;

static int corrupt(rd *r, const char *why) {
  return eu_err(r->err, r->errlen, EU_ECORRUPT, "corrupt encoded value: %s at byte %zu",
                why, (size_t)(r->p - r->start));
}

static size_t rd_left(const rd *r) {
  return (size_t)(r->end - r->p);
}

static int rd_u(rd *r, uint64_t *v) {
  uint64_t x = 0;
  int shift = 0;
  for (;;) {
    unsigned c;
    if (r->p >= r->end) return corrupt(r, "truncated varint");
    c = *r->p;
    if (shift == 63 && (c & 0xfe)) return corrupt(r, "varint longer than 64 bits");
    if (shift > 0 && c == 0) return corrupt(r, "varint with a redundant byte");  /* one value, one encoding */
    r->p++;
    x |= (uint64_t)(c & 0x7f) << shift;
    if (!(c & 0x80)) break;
    shift += 7;
  }
  *v = x;
  return EU_OK;
}

/* Reads a tag and, for anything but a table, its payload into k. For a
 * table, k->type is LUA_TTABLE and k->len its count of pairs. */
static int rd_item(rd *r, eu_key *k) {
  uint64_t u;
  int rc;
  unsigned tag;
  k->isint = 0;
  k->i = 0;
  k->f = 0;
  k->s = NULL;
  k->len = 0;
  k->ref = NULL;
  if (r->p >= r->end) return corrupt(r, "truncated value");
  tag = *r->p++;
  switch (tag) {
    case TAG_NIL: k->type = LUA_TNIL; return EU_OK;
    case TAG_FALSE: case TAG_TRUE:
      k->type = LUA_TBOOLEAN;
      k->i = tag == TAG_TRUE;
      return EU_OK;
    case TAG_INT:
      if ((rc = rd_u(r, &u)) != EU_OK) return rc;
      k->type = LUA_TNUMBER;
      k->isint = 1;
      k->i = (lua_Integer)(int64_t)((u >> 1) ^ (0 - (u & 1)));  /* zigzag */
      return EU_OK;
    case TAG_FLOAT: {
      double d;
      int i;
      if (rd_left(r) < 8) return corrupt(r, "truncated float");
      u = 0;
      for (i = 0; i < 8; i++) u |= (uint64_t)r->p[i] << (8 * i);
      r->p += 8;
      memcpy(&d, &u, 8);
      k->type = LUA_TNUMBER;
      k->f = (lua_Number)d;
      return EU_OK;
    }
    case TAG_STRING:
      if ((rc = rd_u(r, &u)) != EU_OK) return rc;
      if (u > rd_left(r)) return corrupt(r, "string longer than its input");
      k->type = LUA_TSTRING;
      k->s = (const char *)r->p;
      k->len = (size_t)u;
      r->p += u;
      return EU_OK;
    case TAG_TABLE:
      if ((rc = rd_u(r, &u)) != EU_OK) return rc;
      if (u > rd_left(r) / 2) return corrupt(r, "table longer than its input");
      k->type = LUA_TTABLE;
      k->len = (size_t)u;
      return EU_OK;
    case TAG_ID:
      k->type = TYPE_ID;
      return EU_OK;
    default:
      r->p--;
      return corrupt(r, "unknown tag");
  }
}

/* The rules on keys that keep the encoding canonical and rawset safe. */
static int check_key(rd *r, const eu_key *k, const eu_key *prev) {
  if (k->type != LUA_TNUMBER && k->type != LUA_TSTRING && k->type != LUA_TBOOLEAN)
    return corrupt(r, "table key of a type keys cannot have");
  if (k->type == LUA_TNUMBER && !k->isint) {
    if (isnan(k->f)) return corrupt(r, "NaN table key");
    if (k->f == floor(k->f) && k->f >= -0x1p63 && k->f < 0x1p63)
      return corrupt(r, "integral float table key");
  }
  if (prev && eu_key_cmp(prev, k) >= 0) return corrupt(r, "table keys out of order");
  return EU_OK;
}

/* The binding, hex and name that follow an id's tag, well formed. */
static int rd_id(rd *r, eu_key *part) {
  int i, rc;
  const char *bad;
  for (i = 0; i < 3; i++) {
    if ((rc = rd_item(r, &part[i])) != EU_OK) return rc;
    if (part[i].type == LUA_TTABLE || part[i].type == TYPE_ID) return corrupt(r, "an id with a part that is no string");
  }
  if ((bad = id_malformed(part)) != NULL) {
    char why[96];
    snprintf(why, sizeof why, "an id that is no id (%s)", bad);
    return corrupt(r, why);
  }
  return EU_OK;
}

/*
 * Decoding.
 */

static void push_scalar(lua_State *L, const eu_key *k);

/* Pushes the id whose tag was just read: a table of the state's id class. */
static int decode_id(lua_State *L, rd *r) {
  static const char *const fields[3] = { "binding", "hex", "name" };
  eu_key part[3];
  char why[160];
  int i, rc;
  if ((rc = rd_id(r, part)) != EU_OK) return rc;
  if (id_checked(L, part, why, sizeof why)) {
    char what[200];
    snprintf(what, sizeof what, "an id its world did not make (%s)", why);
    return corrupt(r, what);
  }
  if (!lua_checkstack(L, 3))
    return eu_err(r->err, r->errlen, EU_ENOMEM, "out of memory while decoding a value");
  lua_createtable(L, 0, 3);
  for (i = 0; i < 3; i++) {
    if (part[i].type == LUA_TNIL) continue;
    lua_pushstring(L, fields[i]);
    push_scalar(L, &part[i]);
    lua_rawset(L, -3);
  }
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &id_class_key) == LUA_TTABLE) lua_setmetatable(L, -2);
  else lua_pop(L, 1);
  return EU_OK;
}

static void push_scalar(lua_State *L, const eu_key *k) {
  switch (k->type) {
    case LUA_TBOOLEAN: lua_pushboolean(L, (int)k->i); break;
    case LUA_TNUMBER:
      if (k->isint) lua_pushinteger(L, k->i);
      else lua_pushnumber(L, k->f);
      break;
    case LUA_TSTRING: lua_pushlstring(L, k->s, k->len); break;
    default: lua_pushnil(L); break;
  }
}

/* Pushes one value. On failure the caller resets the stack. level is the
 * nesting level a table read here would have. */
static int decode_value(lua_State *L, rd *r, int level) {
  eu_key v, k, prev;
  size_t n, j;
  int rc, narr, nrec;
  if ((rc = rd_item(r, &v)) != EU_OK) return rc;
  if (v.type == TYPE_ID) return decode_id(L, r);
  if (v.type != LUA_TTABLE) {
    push_scalar(L, &v);
    return EU_OK;
  }
  if (level > EU_CLONE_MAXDEPTH) return corrupt(r, "tables nested too deep");
  if (!lua_checkstack(L, 4))
    return eu_err(r->err, r->errlen, EU_ENOMEM, "out of memory while decoding a value");
  n = v.len;
  /* sized for the common shapes (an array when the first key is 1), but
   * only up to a bound: a forged count must not allocate much before the
   * bytes behind it prove corrupt; Lua grows the table past the hint */
  narr = nrec = 0;
  if (n > 0 && rd_left(r) >= 2 && r->p[0] == TAG_INT && r->p[1] == 2)
    narr = n < (1u << 16) ? (int)n : 1 << 16;
  else
    nrec = n < (1u << 16) ? (int)n : 1 << 16;
  lua_createtable(L, narr, nrec);
  for (j = 0; j < n; j++) {
    if ((rc = rd_item(r, &k)) != EU_OK) return rc;
    if ((rc = check_key(r, &k, j ? &prev : NULL)) != EU_OK) return rc;
    push_scalar(L, &k);
    prev = k;  /* its bytes live in the input, not in Lua */
    if ((rc = decode_value(L, r, level + 1)) != EU_OK) return rc;
    if (lua_isnil(L, -1)) return corrupt(r, "nil value in a table");
    lua_rawset(L, -3);
  }
  return EU_OK;
}

int eu_clone_decode(lua_State *L, const char *p, size_t len, int *nout, char *err, size_t errlen) {
  rd r;
  uint64_t n, i;
  int top = lua_gettop(L), rc = EU_OK;
  r.p = r.start = (const unsigned char *)p;
  r.end = r.p + (p ? len : 0);
  r.err = err;
  r.errlen = errlen;
  if (nout) *nout = 0;
  if ((rc = rd_u(&r, &n)) != EU_OK) return rc;
  if (n > rd_left(&r) || n > (uint64_t)(INT32_MAX - 64)) return corrupt(&r, "more values than bytes");
  if (!lua_checkstack(L, (int)n + 4))
    return eu_err(err, errlen, EU_ENOMEM, "too many values to decode (%" PRIu64 ")", n);
  for (i = 0; i < n && rc == EU_OK; i++) rc = decode_value(L, &r, 1);
  if (rc == EU_OK && r.p != r.end) rc = corrupt(&r, "trailing bytes");
  if (rc != EU_OK) {
    lua_settop(L, top);
    return rc;
  }
  if (nout) *nout = (int)n;
  return EU_OK;
}

/*
 * Formatting.
 */

typedef struct fmt {
  rd r;
  eu_buf *out;
  size_t start, maxlen;
  int cut;  /* past maxlen: "..." written, nothing more */
} fmt;

/* Called after each piece: cuts the output to maxlen bytes plus "...". */
static int fmt_check(fmt *f, int rc) {
  if (rc != EU_OK) return rc;
  if (!f->cut && f->out->n - f->start > f->maxlen) {
    f->out->n = f->start + f->maxlen;
    f->cut = 1;
    return eu_buf_puts(f->out, "...");
  }
  return EU_OK;
}

static size_t fmt_budget(const fmt *f) {
  size_t used = f->out->n - f->start;
  if (used >= f->maxlen) return 1;
  return f->maxlen - used < SIZE_MAX ? f->maxlen - used + 1 : SIZE_MAX;
}

static int fmt_scalar(fmt *f, const eu_key *k) {
  char num[64];
  switch (k->type) {
    case LUA_TNIL: return fmt_check(f, eu_buf_puts(f->out, "nil"));
    case LUA_TBOOLEAN: return fmt_check(f, eu_buf_puts(f->out, k->i ? "true" : "false"));
    case LUA_TNUMBER:
      if (k->isint) return fmt_check(f, eu_buf_printf(f->out, "%" PRId64, (int64_t)k->i));
      fmt_float(num, sizeof num, k->f);
      return fmt_check(f, eu_buf_puts(f->out, num));
    default:  /* a string: render no more of it than the cut keeps */
      return fmt_check(f, put_quoted(f->out, k->s, k->len, fmt_budget(f)));
  }
}

/* An id as the call that gives it: POOL:idFromName("pool"), POOL:idFromString("3f2a..."). */
static int fmt_id(fmt *f) {
  eu_key part[3];
  int rc;
  if ((rc = rd_id(&f->r, part)) != EU_OK) return rc;
  if (is_ident(part[0].s, part[0].len)) rc = eu_buf_put(f->out, part[0].s, part[0].len);
  else rc = put_quoted(f->out, part[0].s, part[0].len, part[0].len);
  if (rc == EU_OK) rc = eu_buf_puts(f->out, part[2].type == LUA_TSTRING ? ":idFromName(" : ":idFromString(");
  if ((rc = fmt_check(f, rc)) != EU_OK || f->cut) return rc;
  rc = fmt_scalar(f, part[2].type == LUA_TSTRING ? &part[2] : &part[1]);
  if (rc != EU_OK || f->cut) return rc;
  return fmt_check(f, eu_buf_putc(f->out, ')'));
}

static int fmt_value(fmt *f, int level) {
  eu_key v = { 0 }, k;
  size_t n, j;
  lua_Integer next_pos = 1;  /* 0 once the keys stop being 1, 2, 3 ... */
  int rc;
  if (f->cut) return EU_OK;
  if ((rc = rd_item(&f->r, &v)) != EU_OK) return rc;
  if (v.type == TYPE_ID) return fmt_id(f);
  if (v.type != LUA_TTABLE) return fmt_scalar(f, &v);
  if (level > EU_CLONE_MAXDEPTH) return corrupt(&f->r, "tables nested too deep");
  n = v.len;
  if (n == 0) return fmt_check(f, eu_buf_puts(f->out, "{}"));
  if ((rc = fmt_check(f, eu_buf_puts(f->out, "{ "))) != EU_OK) return rc;
  for (j = 0; j < n && !f->cut; j++) {
    if (j && (rc = fmt_check(f, eu_buf_puts(f->out, ", "))) != EU_OK) return rc;
    if (f->cut) break;  /* the separator reached the cut: no key after the "..." */
    if ((rc = rd_item(&f->r, &k)) != EU_OK) return rc;
    if ((rc = check_key(&f->r, &k, NULL)) != EU_OK) return rc;
    if (next_pos && k.type == LUA_TNUMBER && k.isint && k.i == next_pos) next_pos++;
    else {
      next_pos = 0;
      if (k.type == LUA_TSTRING && is_ident(k.s, k.len))
        rc = eu_buf_put(f->out, k.s, k.len);
      else
        rc = put_subscript(f->out, &k, fmt_budget(f));
      if (rc == EU_OK) rc = eu_buf_puts(f->out, " = ");
      if ((rc = fmt_check(f, rc)) != EU_OK) return rc;
    }
    if ((rc = fmt_value(f, level + 1)) != EU_OK) return rc;
  }
  return f->cut ? EU_OK : fmt_check(f, eu_buf_puts(f->out, " }"));
}

int eu_clone_leads_true(const char *p, size_t len) {
  rd r;
  uint64_t n;
  r.p = r.start = (const unsigned char *)p;
  r.end = r.p + (p ? len : 0);
  r.err = NULL;
  r.errlen = 0;
  return rd_u(&r, &n) == EU_OK && n > 0 && rd_left(&r) > 0 && *r.p == TAG_TRUE;
}

int eu_clone_format(const char *p, size_t len, eu_buf *out, size_t maxlen) {
  fmt f;
  uint64_t n, i;
  int rc;
  f.r.p = f.r.start = (const unsigned char *)p;
  f.r.end = f.r.p + (p ? len : 0);
  f.r.err = NULL;
  f.r.errlen = 0;
  f.out = out;
  f.start = out->n;
  f.maxlen = maxlen;
  f.cut = 0;
  rc = rd_u(&f.r, &n);
  if (rc == EU_OK && n > rd_left(&f.r)) rc = EU_ECORRUPT;
  for (i = 0; rc == EU_OK && i < n && !f.cut; i++) {
    if (i) rc = fmt_check(&f, eu_buf_puts(out, ", "));
    if (rc == EU_OK) rc = fmt_value(&f, 1);
  }
  if (rc == EU_OK && !f.cut && f.r.p != f.r.end) rc = EU_ECORRUPT;
  if (rc != EU_OK) {  /* leave out as it was */
    out->n = f.start;
    if (out->p) out->p[f.start] = '\0';
  }
  return rc;
}
