// The search for one byte value in the next few bytes, sixteen at a time (SSE2 on x86-64): what the usage tap's
// key scan calls for every quote of every event, where a call to memchr costs more than the search itself.
// Header-only and `static inline`, so that Swift inlines it into its caller.
#ifndef SSE_RELAY_CBYTESEARCH_H
#define SSE_RELAY_CBYTESEARCH_H
#include <stddef.h>
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// Whether `cbytesearch_next` uses vector instructions here (a scalar loop otherwise).
static inline int cbytesearch_is_vectorized(void) {
#if defined(__SSE2__)
    return 1;
#else
    return 0;
#endif
}

// The index of the first byte equal to `byte` in p[from..<count], or `count` when there is none. Reads only
// p[0..<count]: the last block is loaded overlapping the one before it rather than past the end.
static inline size_t cbytesearch_next(const uint8_t *p, size_t from, size_t count, uint8_t byte) {
#if defined(__SSE2__)
    const __m128i needle = _mm_set1_epi8((char)byte);
    size_t at = from;
    while (at + 16 <= count) {
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + at)), needle));
        if (mask != 0) return at + (size_t)__builtin_ctz(mask);
        at += 16;
    }
    if (at >= count) return count;
    if (count >= 16) {
        // The last 16 bytes of the buffer; the bits of the bytes before `at` (already searched) are dropped.
        size_t start = count - 16;
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + start)), needle));
        mask &= ~0u << (at - start);
        return mask != 0 ? start + (size_t)__builtin_ctz(mask) : count;
    }
#else
    size_t at = from;
#endif
    for (; at < count; at++) {
        if (p[at] == byte) return at;
    }
    return count;
}
#endif
