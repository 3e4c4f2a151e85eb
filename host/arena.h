/*
 * arena.h: a heap at an address that never moves, restored by copying.
 *
 * An arena is one reserved range of address space with a size-class
 * allocator inside it, its free lists and its top included: everything it
 * knows lives in the range. The bytes from its start to its top are then
 * the whole heap, pointers and all, but for the blocks that never change
 * (fixed blocks, below), and copying them back (eu_arena_load) returns the
 * heap to the moment they were copied (eu_arena_save). The
 * checker keeps an object's isolate in one (isolate.h), so that a schedule
 * can start from a state an earlier one passed through instead of
 * rebuilding it.
 *
 * Pages are taken from the system on first touch and never given back:
 * an arena is made once and used for many runs.
 */
#ifndef EUTAXY_ARENA_H
#define EUTAXY_ARENA_H

#include <stddef.h>

typedef struct eu_arena eu_arena;

/* An arena of four times limit bytes; NULL when the address space cannot
 * be had. limit bytes of blocks fit whatever their sizes were; a heap that
 * frees blocks of one size and asks for another may run out before that
 * (a freed block serves its own size class only). */
eu_arena *eu_arena_new(size_t limit);
void eu_arena_delete(eu_arena *a);
/* Frees every block of the image at once; the fixed blocks stay. */
void eu_arena_clear(eu_arena *a);
/* Frees the fixed blocks too: the arena as eu_arena_new made it. */
void eu_arena_clear_all(eu_arena *a);

void *eu_arena_alloc(eu_arena *a, size_t n);
/* n is the size the block was asked for (or resized to). */
void eu_arena_free(eu_arena *a, void *p, size_t n);
/* realloc's contract, with the block's size given: NULL (p kept) when out of room. */
void *eu_arena_realloc(eu_arena *a, void *p, size_t old, size_t n);

/* Fixed blocks: written once, before the arena's first image, and only
 * read after, such as the code and constants of the modules an isolate
 * loads before anything of its own. They lie at the far end of the range,
 * outside every image, so that saves and loads do not copy them; every
 * image of the arena shares them. eu_arena_alloc_fixed gives one (or, once
 * sealed or with no room, an ordinary block); eu_arena_free and
 * eu_arena_realloc take either kind, and a fixed block's space is never
 * used again before eu_arena_clear_all. eu_arena_seal makes the fixed
 * blocks read-only, so that a write to one faults rather than leaves a
 * heap that no image returns to. */
void *eu_arena_alloc_fixed(eu_arena *a, size_t n);
void eu_arena_seal(eu_arena *a);

/* The image: the bytes a save copies. */
size_t eu_arena_used(const eu_arena *a);
void eu_arena_save(const eu_arena *a, void *to);
/* Returns the arena to an image of its own (len = eu_arena_used then). */
void eu_arena_load(eu_arena *a, const void *from, size_t len);
/* A delta: the arena's image as the changes from base, an image of the
 * same arena (its eu_arena_save, base_len bytes), read as if zeros followed
 * it. Heaps grown from one image differ from it in a small part, so a delta
 * is far smaller than the image: an idle object's heap can be kept as one
 * while another's is in the arena.
 *
 * eu_arena_delta writes it to out, which holds eu_arena_delta_max bytes,
 * and returns its length. eu_arena_apply_delta returns the arena to the
 * image the delta was made from; clean_to says how much of the arena is
 * base already (0 for none), and only the rest is copied. eu_arena_undo_delta
 * makes base again of what the delta changed, so that after it the arena
 * is base up to the delta's image's end. */
size_t eu_arena_delta_max(const eu_arena *a);
size_t eu_arena_delta(const eu_arena *a, const void *base, size_t base_len, unsigned char *out);
void eu_arena_apply_delta(eu_arena *a, const void *base, size_t base_len, size_t clean_to,
                          const unsigned char *delta, size_t len);
void eu_arena_undo_delta(eu_arena *a, const void *base, size_t base_len, const unsigned char *delta, size_t len);
/* The size of the image a delta was made from. */
size_t eu_arena_delta_top(const unsigned char *delta);
/* Where the first block of an emptied arena goes: what an image's first
 * allocation was. */
void *eu_arena_first(eu_arena *a);
/* Asks for the pages of [p, p + n) at once, before they are written: on a
 * virtual machine far cheaper than a fault for each. Nothing changes but
 * the cost (and nothing at all where the kernel cannot). */
void eu_prefault(void *p, size_t n);
/* Whether p is a block of a. */
int eu_arena_owns(const eu_arena *a, const void *p);

#endif
