/*
 * test_arena.c: the fixed-address heap (arena.c) through its API: blocks of
 * the small classes and of the power-of-two ones, realloc's contract, a
 * saved image that returns the heap (pointers inside it included) to the
 * moment it was taken, running out of room, which pointers are its, and
 * the fixed blocks that stay out of its images.
 *
 * Every block a test takes is filled with a pattern of its own and checked
 * later, so two blocks that overlap show as a wrong byte.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "test.h"

static void fill(void *p, size_t n, unsigned char seed) {
  size_t i;
  for (i = 0; i < n; i++) ((unsigned char *)p)[i] = (unsigned char)(seed + i * 7);
}

static int filled(const void *p, size_t n, unsigned char seed) {
  size_t i;
  for (i = 0; i < n; i++)
    if (((const unsigned char *)p)[i] != (unsigned char)(seed + i * 7)) return 0;
  return 1;
}

static int aligned(const void *p) { return ((uintptr_t)p & 15) == 0; }

static void test_small_blocks_are_aligned_apart_and_reused_by_class(void) {
  eu_arena *a = eu_arena_new(1 << 20);
  void *blocks[64];
  size_t n;
  int i = 0;
  ASSERT(a != NULL);
  /* Every size up to 512 in a few steps, the class edges included. */
  for (n = 1; n <= 512 && i < 64; n += n < 48 ? 1 : 29) {
    blocks[i] = eu_arena_alloc(a, n);
    ASSERT(blocks[i] != NULL);
    ASSERT(aligned(blocks[i]));
    fill(blocks[i], n, (unsigned char)i);
    i++;
  }
  for (n = 1, i = 0; n <= 512 && i < 64; n += n < 48 ? 1 : 29, i++) ASSERT(filled(blocks[i], n, (unsigned char)i));
  {
    /* A freed block is what the next block of its class gets (17 and 32
     * share a class); one of another class (33) does not get it. */
    void *p = eu_arena_alloc(a, 17), *q, *r;
    ASSERT(p != NULL);
    eu_arena_free(a, p, 17);
    q = eu_arena_alloc(a, 33);
    ASSERT(q != NULL && q != p);
    r = eu_arena_alloc(a, 32);
    ASSERT_EQ(r, p);
    /* and a size of 0 is a block of its own, of the first class */
    eu_arena_free(a, eu_arena_alloc(a, 16), 16);
    p = eu_arena_alloc(a, 0);
    ASSERT(p != NULL);
    eu_arena_free(a, p, 0);
    ASSERT_EQ(eu_arena_alloc(a, 1), p);
  }
  /* Freed in any order, each comes back to its own class, last in first out. */
  {
    void *x = eu_arena_alloc(a, 100), *y = eu_arena_alloc(a, 100), *z = eu_arena_alloc(a, 200);
    eu_arena_free(a, x, 100);
    eu_arena_free(a, z, 200);
    eu_arena_free(a, y, 100);
    ASSERT_EQ(eu_arena_alloc(a, 97), y);
    ASSERT_EQ(eu_arena_alloc(a, 100), x);
    ASSERT_EQ(eu_arena_alloc(a, 193), z);
  }
  eu_arena_delete(a);
}

static void test_large_blocks_come_in_powers_of_two(void) {
  eu_arena *a = eu_arena_new(8 << 20);
  char *p, *q, *r, *s;
  size_t top;
  ASSERT(a != NULL);
  /* 513 to 1024 bytes: one class of 1024 bytes, cut whole from the top */
  top = eu_arena_used(a);
  p = eu_arena_alloc(a, 513);
  ASSERT(p != NULL && aligned(p));
  ASSERT_EQ(eu_arena_used(a), top + 1024);
  fill(p, 513, 1);
  eu_arena_free(a, p, 513);
  ASSERT_EQ(eu_arena_alloc(a, 1024), p);
  /* 1025 is the next class up: 2048 bytes */
  top = eu_arena_used(a);
  q = eu_arena_alloc(a, 1025);
  ASSERT(q != NULL && q != p && aligned(q));
  ASSERT_EQ(eu_arena_used(a), top + 2048);
  /* a megabyte and one byte takes two megabytes, and its last byte is its own */
  top = eu_arena_used(a);
  r = eu_arena_alloc(a, (1 << 20) + 1);
  ASSERT(r != NULL && aligned(r));
  ASSERT_EQ(eu_arena_used(a), top + (2 << 20));
  fill(r, (1 << 20) + 1, 3);
  s = eu_arena_alloc(a, 4096);
  ASSERT(s != NULL);
  fill(s, 4096, 4);
  ASSERT(filled(r, (1 << 20) + 1, 3));
  ASSERT(s >= r + (1 << 20) + 1 || s + 4096 <= r);
  eu_arena_free(a, r, (1 << 20) + 1);
  ASSERT_EQ(eu_arena_alloc(a, 2 << 20), r);
  eu_arena_delete(a);
}

static void test_realloc_keeps_the_bytes_and_moves_only_across_classes(void) {
  eu_arena *a = eu_arena_new(1 << 20);
  char *p, *q, *in_way;
  ASSERT(a != NULL);
  /* from NULL: an alloc */
  p = eu_arena_realloc(a, NULL, 0, 20);
  ASSERT(p != NULL);
  fill(p, 20, 9);
  /* within its class (17..32): the same block */
  ASSERT_EQ(eu_arena_realloc(a, p, 20, 32), p);
  ASSERT_EQ(eu_arena_realloc(a, p, 32, 17), p);
  ASSERT(filled(p, 17, 9));
  /* across classes: moved, the old bytes copied, the old block freed */
  in_way = eu_arena_alloc(a, 32);
  fill(in_way, 32, 5);
  fill(p, 17, 10);
  q = eu_arena_realloc(a, p, 17, 3000);
  ASSERT(q != NULL && q != p);
  ASSERT(filled(q, 17, 10));
  ASSERT(filled(in_way, 32, 5));
  ASSERT_EQ(eu_arena_alloc(a, 30), p);
  /* shrinking across classes keeps the prefix */
  fill(q, 3000, 11);
  p = eu_arena_realloc(a, q, 3000, 40);
  ASSERT(p != NULL && p != q);
  ASSERT(filled(p, 40, 11));
  /* to 0: freed, NULL returned, the block reused */
  ASSERT(eu_arena_realloc(a, p, 40, 0) == NULL);
  ASSERT_EQ(eu_arena_alloc(a, 48), p);
  eu_arena_delete(a);
}

/* A list whose nodes live in the arena, reached from a root block that is
 * the arena's first. */
typedef struct node {
  struct node *next;
  long value;
  char pad[40];
} node;

typedef struct root {
  node *head;
  long count;
} root;

static root *make_list(eu_arena *a, long n) {
  root *r = eu_arena_alloc(a, sizeof *r);
  long i;
  ASSERT(r != NULL);
  r->head = NULL;
  r->count = 0;
  for (i = 0; i < n; i++) {
    node *x = eu_arena_alloc(a, sizeof *x);
    ASSERT(x != NULL);
    x->value = i * 3;
    fill(x->pad, sizeof x->pad, (unsigned char)i);
    x->next = r->head;
    r->head = x;
    r->count++;
  }
  return r;
}

static void test_load_returns_the_heap_to_a_saved_image_in_place(void) {
  eu_arena *a = eu_arena_new(1 << 20);
  root *r;
  node *x, *before[16], *after[16];
  void *image, *spare;
  size_t len;
  long i, n;
  ASSERT(a != NULL);
  r = make_list(a, 100);
  /* a freed block, so the free lists are in the image too */
  spare = eu_arena_alloc(a, sizeof(node));
  eu_arena_free(a, spare, sizeof(node));
  len = eu_arena_used(a);
  ASSERT((image = malloc(len)) != NULL);
  eu_arena_save(a, image);
  /* What a run would take next from the saved heap. */
  for (i = 0; i < 16; i++) before[i] = eu_arena_alloc(a, sizeof(node));
  ASSERT_EQ(before[0], spare);
  /* The run: values changed, half the list unlinked and freed, the top
   * raised far past the image. */
  for (x = r->head; x; x = x->next) x->value = -1;
  for (x = r->head, n = 0; x && x->next; x = x->next, n++) {
    node *gone = x->next;
    x->next = gone->next;
    eu_arena_free(a, gone, sizeof *gone);
  }
  r->count = -1;
  ASSERT(eu_arena_alloc(a, 300000) != NULL);
  ASSERT(eu_arena_used(a) > len);
  /* Loaded twice, the second time after another run on the same image. */
  for (i = 0; i < 2; i++) {
    eu_arena_load(a, image, len);
    ASSERT_EQ(eu_arena_used(a), len);
    /* the same root at the same address, every node where it was with its bytes */
    ASSERT_EQ(r->count, 100);
    for (x = r->head, n = 99; x; x = x->next, n--) {
      ASSERT(eu_arena_owns(a, x));
      ASSERT_EQ(x->value, n * 3);
      ASSERT(filled(x->pad, sizeof x->pad, (unsigned char)n));
    }
    ASSERT_EQ(n, -1);
    /* the free lists and the top as they were: the same blocks again */
    for (n = 0; n < 16; n++) {
      after[n] = eu_arena_alloc(a, sizeof(node));
      ASSERT_EQ(after[n], before[n]);
    }
    r->head->value = 12345;
    eu_arena_free(a, after[3], sizeof(node));
  }
  free(image);
  eu_arena_delete(a);
}

static void test_running_out_of_room_returns_null_and_keeps_the_heap(void) {
  eu_arena *a = eu_arena_new(4096);
  void *blocks[4096], *p;
  size_t n = 0, i;
  ASSERT(a != NULL);
  /* more than the limit of 64-byte blocks, then NULL */
  while (n < 4096 && (blocks[n] = eu_arena_alloc(a, 64)) != NULL) {
    fill(blocks[n], 64, (unsigned char)n);
    n++;
  }
  ASSERT(n < 4096);
  ASSERT(n * 64 >= 4096);
  ASSERT(eu_arena_alloc(a, 64) == NULL);
  ASSERT(eu_arena_alloc(a, 5000) == NULL);
  ASSERT(eu_arena_alloc(a, SIZE_MAX) == NULL);
  ASSERT(eu_arena_alloc(a, SIZE_MAX / 2) == NULL);
  /* growing out of the class: NULL, the block kept as it was */
  ASSERT(eu_arena_realloc(a, blocks[0], 64, 2000) == NULL);
  for (i = 0; i < n; i++) ASSERT(filled(blocks[i], 64, (unsigned char)i));
  /* a freed block is room again, for its class */
  eu_arena_free(a, blocks[5], 64);
  ASSERT_EQ(eu_arena_alloc(a, 60), blocks[5]);
  ASSERT(eu_arena_alloc(a, 60) == NULL);
  /* cleared, the whole room is there again */
  eu_arena_clear(a);
  p = eu_arena_alloc(a, 2048);
  ASSERT(p != NULL);
  ASSERT(eu_arena_alloc(a, 2048) != NULL);
  eu_arena_delete(a);
  /* A limit nothing can map is NULL, not a crash. */
  ASSERT(eu_arena_new(SIZE_MAX) == NULL);
  ASSERT(eu_arena_new(SIZE_MAX / 2) == NULL);
  ASSERT(eu_arena_new(SIZE_MAX / 8) == NULL);  /* passes the size check, more than any address space */
}

static void test_owns_exactly_the_blocks_below_its_top(void) {
  eu_arena *a = eu_arena_new(1 << 16), *b = eu_arena_new(1 << 16);
  char *p, *q, *last;
  void *image, *outside = malloc(64);
  size_t len;
  ASSERT(a != NULL && b != NULL && outside != NULL);
  p = eu_arena_alloc(a, 100);
  q = eu_arena_alloc(b, 100);
  ASSERT(eu_arena_owns(a, p));
  ASSERT(eu_arena_owns(a, p + 99));
  ASSERT(!eu_arena_owns(a, q));
  ASSERT(eu_arena_owns(b, q));
  ASSERT(!eu_arena_owns(a, outside));
  ASSERT(!eu_arena_owns(a, NULL));
  /* the arena's own header is not a block */
  ASSERT(!eu_arena_owns(a, a));
  ASSERT(!eu_arena_owns(a, (char *)p - 1));
  /* its last block's end is the top: past it, nothing is its */
  last = eu_arena_alloc(a, 16);
  ASSERT(eu_arena_owns(a, last + 15));
  ASSERT(!eu_arena_owns(a, last + 16));
  /* a block taken after a save is no longer one once the image is loaded */
  len = eu_arena_used(a);
  ASSERT((image = malloc(len)) != NULL);
  eu_arena_save(a, image);
  q = eu_arena_alloc(a, 64);
  ASSERT(eu_arena_owns(a, q));
  eu_arena_load(a, image, len);
  ASSERT(!eu_arena_owns(a, q));
  ASSERT(eu_arena_owns(a, p));
  /* nor is any after a clear */
  eu_arena_clear(a);
  ASSERT(!eu_arena_owns(a, p));
  free(image);
  free(outside);
  eu_arena_delete(a);
  eu_arena_delete(b);
}


/* A heap grown from a base in many random ways: scattered words changed,
 * runs changed, blocks freed and new ones cut past the base's end. */
static void grow_from(eu_arena *a, const void *base, size_t base_len, unsigned seed, void **kept, int nkept) {
  int i;
  eu_arena_load(a, base, base_len);
  srand(seed);
  for (i = 0; i < 40; i++) {
    unsigned char *p = kept[rand() % nkept];
    p[rand() % 48] ^= (unsigned char)(1 + rand() % 255);
  }
  if (seed % 3 == 0) eu_arena_free(a, kept[seed % nkept], 48);
  for (i = 0; i < (int)(seed % 7); i++) fill(eu_arena_alloc(a, 16 + (size_t)rand() % 700), 64, (unsigned char)seed);
}

static void test_delta_returns_each_heap_grown_from_a_base(void) {
  eu_arena *a = eu_arena_new(1 << 20);
  void *kept[32], *base, *want[6];
  unsigned char *delta[6], *buf;
  size_t base_len, len[6], want_len[6], clean_to;
  unsigned k;
  int i;
  ASSERT(a != NULL);
  for (i = 0; i < 32; i++) fill(kept[i] = eu_arena_alloc(a, 48), 48, (unsigned char)i);
  base_len = eu_arena_used(a);
  ASSERT((base = malloc(base_len)) != NULL);
  eu_arena_save(a, base);
  /* Each heap packed in turn, the arena left as base after each. */
  for (k = 0; k < 6; k++) {
    grow_from(a, base, base_len, k + 1, kept, 32);
    want_len[k] = eu_arena_used(a);
    ASSERT((want[k] = malloc(want_len[k])) != NULL);
    eu_arena_save(a, want[k]);
    ASSERT((buf = malloc(eu_arena_delta_max(a))) != NULL);
    len[k] = eu_arena_delta(a, base, base_len, buf);
    ASSERT(len[k] < want_len[k] / 2);  /* small changes make a small delta */
    ASSERT(eu_arena_delta_top(buf) == want_len[k]);
    delta[k] = buf;
    eu_arena_undo_delta(a, base, base_len, buf, len[k]);
    ASSERT(memcmp((char *)a + 64, (char *)base + 64, base_len - 64) == 0);
  }
  /* Unpacked in another order, each into whatever the last one left:
   * base up to clean_to, or nothing known (0). */
  clean_to = 0;
  for (k = 0; k < 6; k++) {
    unsigned j = (k * 5 + 2) % 6;
    eu_arena_apply_delta(a, base, base_len, clean_to, delta[j], len[j]);
    ASSERT(eu_arena_used(a) == want_len[j]);
    ASSERT(memcmp((char *)a + 64, (char *)want[j] + 64, want_len[j] - 64) == 0);
    for (i = 0; i < 32; i++) ASSERT(eu_arena_owns(a, kept[i]));
    if (k % 2) {
      eu_arena_undo_delta(a, base, base_len, delta[j], len[j]);
      clean_to = eu_arena_used(a);
    } else {
      fill((char *)a + base_len - 256, 256, 99);  /* garbage: nothing is known */
      clean_to = 0;
    }
  }
  /* the arena still allocates after an unpacked image */
  eu_arena_apply_delta(a, base, base_len, 0, delta[0], len[0]);
  fill(eu_arena_alloc(a, 100), 100, 5);
  for (k = 0; k < 6; k++) {
    free(delta[k]);
    free(want[k]);
  }
  free(base);
  eu_arena_delete(a);
}

/* Whether the page of p may be written, as /proc/self/maps says. */
static int writable(const void *p) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512], perms[8];
  unsigned long from, to;
  int w = -1;
  if (!f) return -1;
  while (w < 0 && fgets(line, sizeof line, f))
    if (sscanf(line, "%lx-%lx %7s", &from, &to, perms) == 3 && (uintptr_t)p >= from && (uintptr_t)p < to)
      w = perms[1] == 'w';
  fclose(f);
  return w;
}

static void test_fixed_blocks_stay_out_of_images_and_are_read_only_once_sealed(void) {
  eu_arena *a = eu_arena_new(1 << 20);
  unsigned char *f[4], *p, *q, *image;
  size_t len, top;
  int i;
  ASSERT(a != NULL);
  p = eu_arena_alloc(a, 100);
  top = eu_arena_used(a);
  for (i = 0; i < 4; i++) {
    ASSERT((f[i] = eu_arena_alloc_fixed(a, 1000 + (size_t)i)) != NULL);
    ASSERT(aligned(f[i]));
    ASSERT(eu_arena_owns(a, f[i]));
    fill(f[i], 1000 + (size_t)i, (unsigned char)i);
  }
  /* apart from each other and from the image, which they do not grow */
  for (i = 1; i < 4; i++) ASSERT(f[i] + 1000 + i <= f[i - 1]);
  ASSERT(f[3] > p + 100);
  ASSERT_EQ(eu_arena_used(a), top);
  eu_arena_seal(a);
  /* sealed: a new one is an ordinary block, and the fixed ones are read-only */
  q = eu_arena_alloc_fixed(a, 64);
  ASSERT(q != NULL && q >= p + 100 && q < f[3]);
  ASSERT(eu_arena_used(a) > top);
  ASSERT_EQ(writable(f[0]), 0);
  ASSERT_EQ(writable(f[3] + 500), 0);
  ASSERT_EQ(writable(q), 1);
  len = eu_arena_used(a);
  ASSERT((image = malloc(len)) != NULL);
  eu_arena_save(a, image);
  /* freeing a fixed block gives nothing back; a realloc of one moves it to an ordinary block */
  eu_arena_free(a, f[1], 1001);
  q = eu_arena_realloc(a, f[2], 1002, 1002);
  ASSERT(q != NULL && q != f[2] && q < f[3]);
  ASSERT(filled(q, 1002, 2));
  ASSERT(eu_arena_alloc(a, 1001) != f[1]);
  /* a load and a clear keep them, with their bytes */
  eu_arena_load(a, image, len);
  ASSERT_EQ(eu_arena_used(a), len);
  eu_arena_clear(a);
  for (i = 0; i < 4; i++) ASSERT(filled(f[i], 1000 + (size_t)i, (unsigned char)i));
  eu_arena_load(a, image, len);
  ASSERT_EQ(eu_arena_used(a), len);
  /* clearing everything makes the range writable and the fixed space free again */
  eu_arena_clear_all(a);
  ASSERT(eu_arena_alloc(a, 100) == p);
  ASSERT_EQ(eu_arena_alloc_fixed(a, 1000), f[0]);
  ASSERT_EQ(writable(f[0]), 1);
  fill(f[0], 1000, 9);
  ASSERT(filled(f[0], 1000, 9));
  free(image);
  eu_arena_delete(a);
}

static const eu_test tests[] = {
  { "hands out small blocks aligned and apart, and reuses a freed one for its class",
    test_small_blocks_are_aligned_apart_and_reused_by_class },
  { "hands out large blocks in powers of two", test_large_blocks_come_in_powers_of_two },
  { "reallocs keeping the bytes, moving only across classes",
    test_realloc_keeps_the_bytes_and_moves_only_across_classes },
  { "returns the heap to a saved image in place, pointers and free lists included",
    test_load_returns_the_heap_to_a_saved_image_in_place },
  { "returns NULL when out of room and keeps the heap", test_running_out_of_room_returns_null_and_keeps_the_heap },
  { "owns exactly the blocks below its top", test_owns_exactly_the_blocks_below_its_top },
  { "returns each heap grown from a base from its delta, whatever the arena held",
    test_delta_returns_each_heap_grown_from_a_base },
  { "keeps fixed blocks out of its images, read-only once sealed, until cleared of everything",
    test_fixed_blocks_stay_out_of_images_and_are_read_only_once_sealed },
};

int main(void) { return test_main(tests, sizeof tests / sizeof tests[0]); }
