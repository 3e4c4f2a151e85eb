/*
 * pattern.c: Lua 5.4's string patterns, with every step charged.
 *
 * Owns the matcher behind string.find, match, gmatch and gsub in an
 * isolate, and nothing else of the string library. It is a backtracking
 * matcher over the pattern text, as the language defines patterns: one
 * single-character class at a time, with its quantifier, captures (also
 * position captures), %b, %f, back-references and the ^ and $ anchors.
 *
 * Every try of a pattern item at a subject position, every byte a plain
 * search compares and every byte a replacement copies is a step. Steps are
 * charged to the meter STEP_BATCH at a time; the charge that spends the
 * budget unwinds out of the matcher (it owns no memory outside Lua's
 * stack), so the stop comes within STEP_BATCH steps of the budget's end.
 */
#include <ctype.h>
#include <string.h>

#include <lauxlib.h>

#include "pattern.h"
#include "sandbox.h"

#define MAX_CAPTURES 32
#define MAX_DEPTH 200      /* nested items: past it the pattern is "too complex" */
#define STEP_BATCH 256
#define CAP_OPEN (-1)      /* a capture whose ')' is not reached yet */
#define CAP_POS (-2)       /* a position capture, () */
#define SPECIALS "^$*+?.([%-"

typedef struct matcher {
  lua_State *L;
  const char *what;      /* the function, for the CPU limit's message */
  const char *src, *src_end, *pat_end;
  int depth;
  int ncap;
  int64_t steps;
  struct {
    const char *at;
    ptrdiff_t len;
  } cap[MAX_CAPTURES];
} matcher;

static void step(matcher *m, int64_t n) {
  m->steps += n;
  if (m->steps >= STEP_BATCH) {
    int64_t s = m->steps;
    m->steps = 0;
    eu_sandbox_charge(m->L, s, m->what);
  }
}

static void flush(matcher *m) {
  int64_t s = m->steps;
  m->steps = 0;
  if (s) eu_sandbox_charge(m->L, s, m->what);
}

/* Does c belong to the class letter cl (%a, %d, ...)? An unknown letter
 * stands for itself. */
static int in_class(int c, int cl) {
  int r;
  switch (tolower(cl)) {
    case 'a': r = isalpha(c); break;
    case 'c': r = iscntrl(c); break;
    case 'd': r = isdigit(c); break;
    case 'g': r = isgraph(c); break;
    case 'l': r = islower(c); break;
    case 'p': r = ispunct(c); break;
    case 's': r = isspace(c); break;
    case 'u': r = isupper(c); break;
    case 'w': r = isalnum(c); break;
    case 'x': r = isxdigit(c); break;
    case 'z': r = c == 0; break;  /* deprecated in Lua 5.2, still accepted */
    default: return cl == c;
  }
  if (isupper(cl)) r = !r;
  return r != 0;
}

/* Where the single-character item at p ends (after a ']' for a set). */
static const char *item_end(matcher *m, const char *p) {
  char c = *p++;
  if (c == '%') {
    if (p >= m->pat_end) luaL_error(m->L, "malformed pattern (ends with '%%')");
    return p + 1;
  }
  if (c == '[') {
    if (p < m->pat_end && *p == '^') p++;
    do {  /* the first character of a set is never its end, even a ']' */
      if (p >= m->pat_end) luaL_error(m->L, "malformed pattern (missing ']')");
      c = *p++;
      if (c == '%' && p < m->pat_end) p++;
    } while (p >= m->pat_end || *p != ']');
    return p + 1;
  }
  return p;
}

/* c against the set from '[' at p to its ']' at last. */
static int in_set(int c, const char *p, const char *last) {
  int yes = 1;
  p++;
  if (*p == '^') {
    yes = 0;
    p++;
  }
  for (; p < last; p++) {
    if (*p == '%' && p + 1 < last) {
      p++;
      if (in_class(c, (unsigned char)*p)) return yes;
    } else if (p + 2 < last && p[1] == '-') {
      if ((unsigned char)p[0] <= c && c <= (unsigned char)p[2]) return yes;
      p += 2;
    } else if ((unsigned char)*p == c) {
      return yes;
    }
  }
  return !yes;
}

/* Does the item from p to ep match the character at s? */
static int one(matcher *m, const char *s, const char *p, const char *ep) {
  int c;
  if (s >= m->src_end) return 0;
  c = (unsigned char)*s;
  switch (*p) {
    case '.': return 1;
    case '%': return in_class(c, (unsigned char)p[1]);
    case '[': return in_set(c, p, ep - 1);
    default: return (unsigned char)*p == c;
  }
}

static const char *do_match(matcher *m, const char *s, const char *p);

/* %bxy at p (pointing at x). */
static const char *balance(matcher *m, const char *s, const char *p) {
  int open, close, depth = 1;
  if (p + 1 >= m->pat_end) luaL_error(m->L, "malformed pattern (missing arguments to '%%b')");
  open = (unsigned char)p[0];
  close = (unsigned char)p[1];
  if (s >= m->src_end || (unsigned char)*s != open) return NULL;
  while (++s < m->src_end) {
    int c = (unsigned char)*s;
    step(m, 1);
    if (c == close) {
      if (--depth == 0) return s + 1;
    } else if (c == open) {
      depth++;
    }
  }
  return NULL;
}

/* The longest run of the item, then shorter ones until the rest matches. */
static const char *greedy(matcher *m, const char *s, const char *p, const char *ep) {
  ptrdiff_t n = 0;
  while (one(m, s + n, p, ep)) {
    n++;
    step(m, 1);
  }
  for (; n >= 0; n--) {
    const char *r = do_match(m, s + n, ep + 1);
    if (r) return r;
    step(m, 1);
  }
  return NULL;
}

/* The shortest run of the item that lets the rest match. */
static const char *lazy(matcher *m, const char *s, const char *p, const char *ep) {
  for (;;) {
    const char *r = do_match(m, s, ep + 1);
    if (r) return r;
    if (!one(m, s, p, ep)) return NULL;
    s++;
    step(m, 1);
  }
}

static const char *open_capture(matcher *m, const char *s, const char *p, ptrdiff_t len) {
  const char *r;
  if (m->ncap >= MAX_CAPTURES) luaL_error(m->L, "too many captures");
  m->cap[m->ncap].at = s;
  m->cap[m->ncap].len = len;
  m->ncap++;
  r = do_match(m, s, p);
  if (!r) m->ncap--;
  return r;
}

static const char *close_capture(matcher *m, const char *s, const char *p) {
  int i;
  const char *r;
  for (i = m->ncap - 1; i >= 0 && m->cap[i].len != CAP_OPEN; i--) {}
  if (i < 0) luaL_error(m->L, "invalid pattern capture");
  m->cap[i].len = s - m->cap[i].at;
  r = do_match(m, s, p);
  if (!r) m->cap[i].len = CAP_OPEN;
  return r;
}

/* %1 to %9 at s. */
static const char *backref(matcher *m, const char *s, int digit) {
  int i = digit - '1';
  size_t len;
  if (i < 0 || i >= m->ncap || m->cap[i].len == CAP_OPEN)
    luaL_error(m->L, "invalid capture index %%%d", i + 1);
  if (m->cap[i].len == CAP_POS) return NULL;
  len = (size_t)m->cap[i].len;
  step(m, (int64_t)len);
  if ((size_t)(m->src_end - s) >= len && memcmp(m->cap[i].at, s, len) == 0) return s + len;
  return NULL;
}

static const char *do_match(matcher *m, const char *s, const char *p) {
  if (++m->depth > MAX_DEPTH) luaL_error(m->L, "pattern too complex");
  for (;;) {
    const char *ep;
    step(m, 1);
    if (p == m->pat_end) break;
    switch (*p) {
      case '(':
        if (p + 1 < m->pat_end && p[1] == ')') s = open_capture(m, s, p + 2, CAP_POS);
        else s = open_capture(m, s, p + 1, CAP_OPEN);
        goto done;
      case ')':
        s = close_capture(m, s, p + 1);
        goto done;
      case '$':
        if (p + 1 == m->pat_end) {
          if (s != m->src_end) s = NULL;
          goto done;
        }
        break;
      case '%':
        if (p + 1 >= m->pat_end) break;  /* item_end reports it */
        if (p[1] == 'b') {
          s = balance(m, s, p + 2);
          if (!s) goto done;
          p += 4;
          continue;
        }
        if (p[1] == 'f') {
          int before, here;
          p += 2;
          if (p >= m->pat_end || *p != '[') luaL_error(m->L, "missing '[' after '%%f' in pattern");
          ep = item_end(m, p);
          before = s == m->src ? 0 : (unsigned char)s[-1];
          here = s < m->src_end ? (unsigned char)*s : 0;
          if (in_set(before, p, ep - 1) || !in_set(here, p, ep - 1)) {
            s = NULL;
            goto done;
          }
          p = ep;
          continue;
        }
        if (isdigit((unsigned char)p[1])) {
          s = backref(m, s, (unsigned char)p[1]);
          if (!s) goto done;
          p += 2;
          continue;
        }
        break;
      default:
        break;
    }
    ep = item_end(m, p);
    if (ep < m->pat_end && *ep == '?') {
      const char *r;
      if (one(m, s, p, ep) && (r = do_match(m, s + 1, ep + 1)) != NULL) {
        s = r;
        goto done;
      }
      p = ep + 1;
      continue;
    }
    if (ep < m->pat_end && *ep == '+') {
      s = one(m, s, p, ep) ? greedy(m, s + 1, p, ep) : NULL;
      goto done;
    }
    if (ep < m->pat_end && *ep == '*') {
      s = greedy(m, s, p, ep);
      goto done;
    }
    if (ep < m->pat_end && *ep == '-') {
      s = lazy(m, s, p, ep);
      goto done;
    }
    if (!one(m, s, p, ep)) {
      s = NULL;
      goto done;
    }
    s++;
    p = ep;
  }
done:
  m->depth--;
  return s;
}

static void start(matcher *m, lua_State *L, const char *what, const char *s, size_t ls, const char *p,
                  size_t lp) {
  m->L = L;
  m->what = what;
  m->src = s;
  m->src_end = s + ls;
  m->pat_end = p + lp;
  m->steps = 0;
  m->depth = 0;
  m->ncap = 0;
}

/* Capture i of a match from s to e; the whole match stands in for
 * capture 1 of a pattern without captures. Returns what it pushed (1). */
static void push_capture(matcher *m, int i, const char *s, const char *e) {
  if (i >= m->ncap) {
    if (i != 0) luaL_error(m->L, "invalid capture index %%%d", i + 1);
    lua_pushlstring(m->L, s, (size_t)(e - s));
    return;
  }
  if (m->cap[i].len == CAP_OPEN) luaL_error(m->L, "unfinished capture");
  if (m->cap[i].len == CAP_POS) lua_pushinteger(m->L, (lua_Integer)(m->cap[i].at - m->src) + 1);
  else lua_pushlstring(m->L, m->cap[i].at, (size_t)m->cap[i].len);
}

/* The captures, or the whole match when there are none and s is given. */
static int push_captures(matcher *m, const char *s, const char *e) {
  int i, n = (m->ncap == 0 && s) ? 1 : m->ncap;
  luaL_checkstack(m->L, n, "too many captures");
  for (i = 0; i < n; i++) push_capture(m, i, s, e);
  return n;
}

/* Lua's rule for an init argument: 1-based, negative from the end. */
static size_t start_at(lua_Integer pos, size_t len) {
  if (pos > 0) return (size_t)pos;
  if (pos == 0) return 1;
  if (pos < -(lua_Integer)len) return 1;
  return len + (size_t)pos + 1;
}

static int has_specials(const char *p, size_t lp) {
  size_t i;
  for (i = 0; i < lp; i++)
    if (p[i] && strchr(SPECIALS, p[i])) return 1;
  return 0;
}

/* The first occurrence of p in s, one charged comparison at a time. */
static const char *plain_find(matcher *m, const char *s, size_t ls, const char *p, size_t lp) {
  const char *end;
  if (lp == 0) return s;
  if (lp > ls) return NULL;
  end = s + (ls - lp);
  for (; s <= end; s++) {
    const char *hit = memchr(s, *p, (size_t)(end - s) + 1);
    if (!hit) {
      step(m, (int64_t)(end - s) / 16 + 1);
      return NULL;
    }
    step(m, (int64_t)(hit - s) / 16 + (int64_t)lp);
    s = hit;
    if (memcmp(s + 1, p + 1, lp - 1) == 0) return s;
  }
  return NULL;
}

static int find_or_match(lua_State *L, int find) {
  size_t ls, lp;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  size_t init = start_at(luaL_optinteger(L, 3, 1), ls) - 1;
  matcher m;
  start(&m, L, find ? "string.find" : "string.match", s, ls, p, lp);
  if (init > ls) {
    luaL_pushfail(L);
    return 1;
  }
  if (find && (lua_toboolean(L, 4) || !has_specials(p, lp))) {
    const char *hit = plain_find(&m, s + init, ls - init, p, lp);
    flush(&m);
    if (hit) {
      lua_pushinteger(L, (lua_Integer)(hit - s) + 1);
      lua_pushinteger(L, (lua_Integer)(hit - s) + (lua_Integer)lp);
      return 2;
    }
  } else {
    const char *at = s + init;
    int anchored = lp > 0 && *p == '^';
    if (anchored) {
      p++;
      lp--;
      m.pat_end = p + lp;
    }
    do {
      const char *e;
      m.ncap = 0;
      m.depth = 0;
      if ((e = do_match(&m, at, p)) != NULL) {
        flush(&m);
        if (find) {
          lua_pushinteger(L, (lua_Integer)(at - s) + 1);
          lua_pushinteger(L, (lua_Integer)(e - s));
          return push_captures(&m, NULL, NULL) + 2;
        }
        return push_captures(&m, at, e);
      }
    } while (at++ < m.src_end && !anchored);
    flush(&m);
  }
  luaL_pushfail(L);
  return 1;
}

static int p_find(lua_State *L) { return find_or_match(L, 1); }
static int p_match(lua_State *L) { return find_or_match(L, 0); }

/* gmatch's state: upvalues 1 the subject, 2 the pattern, 3 this. */
typedef struct gmatch_state {
  size_t pos;       /* where the next try starts */
  ptrdiff_t last;   /* where the last match ended, -1 for none: an empty match there is skipped */
} gmatch_state;

static int gmatch_step(lua_State *L) {
  size_t ls, lp;
  const char *s = lua_tolstring(L, lua_upvalueindex(1), &ls);
  const char *p = lua_tolstring(L, lua_upvalueindex(2), &lp);
  gmatch_state *g = lua_touserdata(L, lua_upvalueindex(3));
  const char *at;
  matcher m;
  start(&m, L, "string.gmatch", s, ls, p, lp);
  for (at = s + g->pos; at <= m.src_end; at++) {
    const char *e;
    m.ncap = 0;
    m.depth = 0;
    if ((e = do_match(&m, at, p)) != NULL && (g->last < 0 || e != s + g->last)) {
      flush(&m);
      g->pos = (size_t)(e - s);
      g->last = e - s;
      return push_captures(&m, at, e);
    }
  }
  flush(&m);
  g->pos = ls + 1;
  return 0;
}

static int p_gmatch(lua_State *L) {
  size_t ls;
  gmatch_state *g;
  size_t init;
  luaL_checklstring(L, 1, &ls);
  luaL_checkstring(L, 2);
  init = start_at(luaL_optinteger(L, 3, 1), ls) - 1;
  lua_settop(L, 2);
  g = lua_newuserdatauv(L, sizeof *g, 0);
  g->pos = init > ls ? ls + 1 : init;
  g->last = -1;
  lua_pushcclosure(L, gmatch_step, 3);
  return 1;
}

/* The replacement string's text for a match from s to e. */
static void add_string(matcher *m, luaL_Buffer *b, const char *s, const char *e) {
  size_t lr;
  const char *r = lua_tolstring(m->L, 3, &lr), *end = r + lr;
  step(m, (int64_t)lr);
  while (r < end) {
    const char *pct = memchr(r, '%', (size_t)(end - r));
    if (!pct) {
      luaL_addlstring(b, r, (size_t)(end - r));
      return;
    }
    luaL_addlstring(b, r, (size_t)(pct - r));
    r = pct + 1;
    if (r >= end) luaL_error(m->L, "invalid use of '%%' in replacement string");
    if (*r == '%') {
      luaL_addchar(b, '%');
    } else if (*r == '0') {
      luaL_addlstring(b, s, (size_t)(e - s));
    } else if (isdigit((unsigned char)*r)) {
      push_capture(m, *r - '1', s, e);
      luaL_tolstring(m->L, -1, NULL);
      lua_remove(m->L, -2);
      luaL_addvalue(b);
    } else {
      luaL_error(m->L, "invalid use of '%%' in replacement string");
    }
    r++;
  }
}

/* Adds what replaces the match from s to e; false or nil keeps it. */
static void add_value(matcher *m, luaL_Buffer *b, const char *s, const char *e, int tr) {
  lua_State *L = m->L;
  if (tr == LUA_TFUNCTION) {
    int n;
    lua_pushvalue(L, 3);
    n = push_captures(m, s, e);
    lua_call(L, n, 1);
  } else if (tr == LUA_TTABLE) {
    push_capture(m, 0, s, e);
    lua_gettable(L, 3);
  } else {
    add_string(m, b, s, e);
    return;
  }
  if (!lua_toboolean(L, -1)) {
    lua_pop(L, 1);
    luaL_addlstring(b, s, (size_t)(e - s));
  } else if (!lua_isstring(L, -1)) {
    luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
  } else {
    luaL_addvalue(b);
  }
}

static int p_gsub(lua_State *L) {
  size_t ls, lp;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  const char *at = s, *last = NULL;
  int tr = lua_type(L, 3);
  lua_Integer max_n = luaL_optinteger(L, 4, (lua_Integer)ls + 1), n = 0;
  int anchored = lp > 0 && *p == '^', changed = 0;
  matcher m;
  luaL_Buffer b;
  luaL_argexpected(L, tr == LUA_TNUMBER || tr == LUA_TSTRING || tr == LUA_TFUNCTION || tr == LUA_TTABLE, 3,
                   "string/function/table");
  if (anchored) {
    p++;
    lp--;
  }
  start(&m, L, "string.gsub", s, ls, p, lp);
  luaL_buffinit(L, &b);
  while (n < max_n) {
    const char *e;
    m.ncap = 0;
    m.depth = 0;
    if ((e = do_match(&m, at, p)) != NULL && e != last) {
      n++;
      changed = 1;
      add_value(&m, &b, at, e, tr);
      at = last = e;
    } else if (at < m.src_end) {
      luaL_addchar(&b, *at++);
    } else {
      break;
    }
    if (anchored) break;
  }
  flush(&m);
  if (!changed) {
    lua_pushvalue(L, 1);
  } else {
    luaL_addlstring(&b, at, (size_t)(m.src_end - at));
    luaL_pushresult(&b);
  }
  lua_pushinteger(L, n);
  return 2;
}

void eu_pattern_open(lua_State *L, int idx) {
  static const luaL_Reg funcs[] = {
    {"find", p_find}, {"match", p_match}, {"gmatch", p_gmatch}, {"gsub", p_gsub}, {NULL, NULL}
  };
  const luaL_Reg *f;
  idx = lua_absindex(L, idx);
  for (f = funcs; f->name; f++) {
    lua_pushcfunction(L, f->func);
    lua_setfield(L, idx, f->name);
  }
}
