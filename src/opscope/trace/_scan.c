/*
 * opscope.trace._scan: one run of Chrome-trace events -> columns, in one pass over the bytes.
 *
 * scan(piece) reads a run of `traceEvents` entries (objects separated by commas, without the
 * array's brackets) and returns the fields the event table reads as column buffers, or None
 * when the run holds anything outside the common shapes below: the caller then converts the
 * run with the typed or the dict decoder (opscope.trace.rows), which handle everything JSON
 * can say.  None is also the answer for text that is not JSON; the callers find out why.
 *
 * Every value is produced exactly as the Python decoders produce it (opscope.trace.kineto):
 *   ph, name, cat   a string (escapes decoded) or null/absent -> "" ; anything else: None
 *   pid, tid        a string, or an integer written as its digits; null/absent -> ""
 *   ts              a plain decimal number (or string holding one) -> ns: whole * 1000 + the
 *                   first three decimals, + 1 when the fourth is 5 or more (to_ns on text);
 *                   absent -> flag 1, null -> flag 2 (bad); exponents, > 16 digits: None
 *   dur             an integer * 1000; a decimal through the double the decoders make of it:
 *                   floor(f) * 1000 + rint((f - floor(f)) * 1000) (|f| < 2**43); null/absent
 *                   -> 0 and not bad; strings, exponents: None
 *   id / bind_id    flow id: `id` unless absent or null, else `bind_id`, as an int64 (as_int:
 *                   an integer or a digit string; null where it is not one)
 *   args            absent or an object (else None), kept as its text with the whitespace
 *                   outside strings removed; the first spelling present of the correlation
 *                   and External id keys, as an int64 (as_int), null where absent or not one
 * Duplicate keys: the last one wins (as a dict).  Strings must be valid UTF-8 with no lone
 * surrogate escape; more than 2 GiB of one column: None.
 *
 * The scan holds no Python object and runs with the GIL released.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define US_LIMIT 9000000000000000LL /* |us| * 1000 stays inside int64 */
#define LONG_FLOAT_US 8796093022208.0 /* 2**43 */

typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra)
        cap *= 2;
    char *q = (char *)realloc(b->p, cap);
    if (!q)
        return -1;
    b->p = q;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (n == 0)
        return 0; /* memcpy must not see a null pointer, even for nothing */
    if (buf_reserve(b, n))
        return -1;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

static inline int buf_byte(Buf *b, char c) {
    if (b->len >= b->cap && buf_reserve(b, 1))
        return -1;
    b->p[b->len++] = c;
    return 0;
}

static inline int buf_i64(Buf *b, int64_t v) { return buf_put(b, &v, sizeof v); }

static inline int buf_i32(Buf *b, int32_t v) { return buf_put(b, &v, sizeof v); }

static inline int buf_u8(Buf *b, uint8_t v) { return buf_put(b, &v, 1); }

/* A string column: int32 offsets and UTF-8 data. */
typedef struct {
    Buf offsets, data;
    size_t mark; /* data length where the current event's value starts */
} StrCol;

static int strcol_init(StrCol *c) { return buf_i32(&c->offsets, 0); }

static int strcol_end(StrCol *c) {
    if (c->data.len > INT32_MAX)
        return -1;
    return buf_i32(&c->offsets, (int32_t)c->data.len);
}

typedef struct {
    const unsigned char *p, *end, *base;
    int spaced; /* whitespace was skipped since this was last cleared */
} Sc;

static inline void ws(Sc *s) {
    const unsigned char *p = s->p;
    while (p < s->end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    if (p != s->p) {
        s->spaced = 1;
        s->p = p;
    }
}

/* Validated JSON text [p, end) appended without the whitespace outside its strings. */
static int copy_compact(Buf *out, const unsigned char *p, const unsigned char *end) {
    if (buf_reserve(out, (size_t)(end - p)))
        return -1;
    unsigned char *o = (unsigned char *)out->p + out->len;
    int in_str = 0;
    for (; p < end; p++) {
        unsigned char c = *p;
        if (in_str) {
            *o++ = c;
            if (c == '\\')
                *o++ = *++p; /* the escaped character (the text is valid JSON) */
            else if (c == '"')
                in_str = 0;
        } else if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
            *o++ = c;
            in_str = c == '"';
        }
    }
    out->len = (size_t)((char *)o - out->p);
    return 0;
}

static int hex4(const unsigned char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

/* Length of the valid UTF-8 sequence at p (lead byte >= 0x80), 0 if invalid. */
static int utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    if (c >= 0xC2 && c <= 0xDF) {
        if (end - p >= 2 && (p[1] & 0xC0) == 0x80)
            return 2;
        return 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80)
            return 0;
        if (c == 0xE0 && p[1] < 0xA0)
            return 0; /* overlong */
        if (c == 0xED && p[1] >= 0xA0)
            return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
            (p[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && p[1] < 0x90)
            return 0;
        if (c == 0xF4 && p[1] >= 0x90)
            return 0;
        return 4;
    }
    return 0;
}

static int put_utf8(Buf *b, unsigned cp) {
    char t[4];
    int n;
    if (cp < 0x80) {
        t[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        t[0] = (char)(0xC0 | (cp >> 6));
        t[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        t[0] = (char)(0xE0 | (cp >> 12));
        t[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        t[0] = (char)(0xF0 | (cp >> 18));
        t[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        t[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return buf_put(b, t, (size_t)n);
}

/* The first byte of the 8 at p that is a quote, a backslash, a control character or not
 * ASCII (8 when none is): word-at-a-time, the lowest flagged byte is exact. */
static inline int special8(const unsigned char *p) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t x;
    memcpy(&x, p, 8);
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    uint64_t m = ((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x) | x;
    m &= highs;
    return m ? __builtin_ctzll(m) >> 3 : 8;
}

/*
 * The string at s->p (its opening quote).  dec: its decoded content appended (when given).
 * *escaped: whether it held a backslash.  Returns 0, or -1 (not JSON, a lone surrogate
 * escape, out of memory).
 */
static int scan_string(Sc *s, Buf *dec, int *escaped) {
    const unsigned char *p = s->p + 1, *end = s->end;
    const unsigned char *run = p; /* start of the bytes not yet copied to dec */
    int esc = 0;
    for (;;) {
        while (end - p >= 8) {
            int k = special8(p);
            p += k;
            if (k < 8)
                break;
        }
        while (p < end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80)
            p++;
        if (p >= end)
            return -1;
        unsigned c = *p;
        if (c == '"')
            break;
        if (c < 0x20)
            return -1;
        if (c >= 0x80) {
            int n = utf8_len(p, end);
            if (!n)
                return -1;
            p += n;
            continue;
        }
        /* a backslash */
        esc = 1;
        if (dec && buf_put(dec, run, (size_t)(p - run)))
            return -1;
        if (end - p < 2)
            return -1;
        unsigned e = p[1];
        char out;
        switch (e) {
        case '"': out = '"'; break;
        case '\\': out = '\\'; break;
        case '/': out = '/'; break;
        case 'b': out = '\b'; break;
        case 'f': out = '\f'; break;
        case 'n': out = '\n'; break;
        case 'r': out = '\r'; break;
        case 't': out = '\t'; break;
        case 'u': {
            unsigned cp;
            if (end - p < 6 || hex4(p + 2, &cp))
                return -1;
            p += 6;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return -1; /* a lone high surrogate */
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return -1; /* a lone low surrogate */
            }
            if (dec && put_utf8(dec, cp))
                return -1;
            run = p;
            continue;
        }
        default:
            return -1;
        }
        if (dec && buf_byte(dec, out))
            return -1;
        p += 2;
        run = p;
    }
    if (dec && buf_put(dec, run, (size_t)(p - run)))
        return -1;
    p++; /* the closing quote */
    if (escaped)
        *escaped = esc;
    s->p = p;
    return 0;
}

/* A JSON number's shape. */
typedef struct {
    const unsigned char *start, *end;
    const unsigned char *whole, *whole_end; /* the integer digits */
    const unsigned char *frac, *frac_end;   /* the decimals (empty when none) */
    int neg, has_exp;
} Num;

static int scan_number(Sc *s, Num *n) {
    const unsigned char *p = s->p, *end = s->end;
    n->start = p;
    n->neg = 0;
    n->has_exp = 0;
    if (p < end && *p == '-') {
        n->neg = 1;
        p++;
    }
    n->whole = p;
    if (p >= end || *p < '0' || *p > '9')
        return -1;
    if (*p == '0') {
        p++;
    } else {
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    }
    n->whole_end = p;
    n->frac = n->frac_end = p;
    if (p < end && *p == '.') {
        p++;
        n->frac = p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == n->frac)
            return -1;
        n->frac_end = p;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        n->has_exp = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        const unsigned char *d = p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == d)
            return -1;
    }
    n->end = p;
    s->p = p;
    return 0;
}

static int literal(Sc *s, const char *word, size_t len) {
    if ((size_t)(s->end - s->p) < len || memcmp(s->p, word, len) != 0)
        return -1;
    s->p += len;
    return 0;
}

/* Past the opening character of an object or array: 1 when it closes at once (consumed). */
static int opens_empty(Sc *s, unsigned close) {
    s->p++;
    ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return 1;
    }
    return 0;
}

/* An object member's key, through its colon: the key's raw text is [*k, *k + *klen). */
static int member_key(Sc *s, const unsigned char **k, size_t *klen, int *escaped) {
    ws(s);
    if (s->p >= s->end || *s->p != '"')
        return -1;
    *k = s->p + 1;
    if (scan_string(s, NULL, escaped))
        return -1;
    *klen = (size_t)(s->p - 1 - *k);
    ws(s);
    if (s->p >= s->end || *s->p != ':')
        return -1;
    s->p++;
    return 0;
}

/* After a member or element: 1 at a comma (another follows), 0 at close, -1 otherwise. */
static int next_member(Sc *s, unsigned close) {
    ws(s);
    if (s->p >= s->end)
        return -1;
    if (*s->p == ',') {
        s->p++;
        return 1;
    }
    if (*s->p == close) {
        s->p++;
        return 0;
    }
    return -1;
}

/* Any value, validated and skipped, without recursion: an explicit stack of the open
 * containers' closers (on the heap past 256 levels), so args nested 100,000 levels deep are
 * read like any others.  The depth argument is kept for the callers; it bounds nothing. */
static int scan_value(Sc *s, int depth) {
    (void)depth;
    unsigned char small[256];
    unsigned char *stack = small;
    size_t cap = sizeof small, n = 0;
    int rc = -1;
    for (;;) {
        ws(s);
        if (s->p >= s->end)
            goto done;
        unsigned c = *s->p;
        if (c == '{' || c == '[') {
            unsigned close = c == '{' ? '}' : ']';
            if (!opens_empty(s, close)) {
                if (n == cap) {
                    size_t grown = cap * 2;
                    unsigned char *bigger = stack == small ? malloc(grown) : realloc(stack, grown);
                    if (bigger == NULL)
                        goto done;
                    if (stack == small)
                        memcpy(bigger, small, n);
                    stack = bigger;
                    cap = grown;
                }
                stack[n++] = (unsigned char)close;
                const unsigned char *k;
                size_t klen;
                if (close == '}' && member_key(s, &k, &klen, NULL))
                    goto done;
                continue; /* the container's first value */
            }
        } else if (c == '"') {
            if (scan_string(s, NULL, NULL))
                goto done;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            Num num;
            if (scan_number(s, &num))
                goto done;
        } else {
            const char *word = c == 't' ? "true" : c == 'f' ? "false" : c == 'n' ? "null" : NULL;
            if (word == NULL || literal(s, word, strlen(word)))
                goto done;
        }
        /* a complete value: close the containers it completes */
        for (;;) {
            if (n == 0) {
                rc = 0;
                goto done;
            }
            unsigned close = stack[n - 1];
            int more = next_member(s, close);
            if (more < 0)
                goto done;
            if (more == 1) {
                const unsigned char *k;
                size_t klen;
                if (close == '}' && member_key(s, &k, &klen, NULL))
                    goto done;
                break; /* the next value of this container */
            }
            n--; /* closed: a complete value of its parent */
        }
    }
done:
    if (stack != small)
        free(stack);
    return rc;
}

/* A number's value as the double the Python decoders make of it; -1 when its text is too
 * long or strtod does not read it to its end (a locale whose decimal point is not '.': the
 * run goes the Python way). */
static int number_double(const Num *n, double *f) {
    char tmp[64];
    size_t len = (size_t)(n->end - n->start);
    if (len >= sizeof tmp)
        return -1;
    memcpy(tmp, n->start, len);
    tmp[len] = 0;
    char *stop;
    *f = strtod(tmp, &stop);
    return stop == tmp + len ? 0 : -1;
}

/* Digits [start, end) as an int64; -1 on overflow. */
static int digits_i64(const unsigned char *p, const unsigned char *end, int neg, int64_t *out) {
    uint64_t v = 0;
    if (p == end)
        return -1;
    for (; p < end; p++) {
        unsigned d = *p - '0';
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return -1;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX)
            return -1;
        *out = (int64_t)v;
    }
    return 0;
}

/* to_ns on plain decimal text: whole * 1000 + three decimals, half up on the fourth.
 * 1: done; 0: not plain enough (the caller gives the run up). */
static int text_ns(int neg, const unsigned char *w, const unsigned char *we,
                   const unsigned char *f, const unsigned char *fe, int64_t *out) {
    if (we - w < 1 || we - w > 16)
        return 0;
    int64_t whole = 0;
    for (const unsigned char *p = w; p < we; p++)
        whole = whole * 10 + (*p - '0');
    if (whole >= US_LIMIT)
        return 0;
    int64_t frac = 0;
    for (int i = 0; i < 3; i++)
        frac = frac * 10 + (f + i < fe ? f[i] - '0' : 0);
    int64_t ns = whole * 1000 + frac + (fe - f > 3 && f[3] >= '5');
    *out = neg ? -ns : ns;
    return 1;
}

/* as_int on a string's raw content (no escapes, ASCII): spaces stripped, an optional minus,
 * digits.  1: value; 0: not an integer (null). */
static int text_int(const unsigned char *p, const unsigned char *end, int64_t *out) {
    while (p < end && *p == ' ')
        p++;
    while (end > p && end[-1] == ' ')
        end--;
    int neg = 0;
    const unsigned char *d = p;
    while (d < end && *d == '-')
        d++;
    if (d - p > 1)
        return 0; /* "--5": int() refuses it */
    neg = d - p == 1;
    if (d == end)
        return 0;
    for (const unsigned char *q = d; q < end; q++)
        if (*q < '0' || *q > '9')
            return 0;
    while (d < end - 1 && *d == '0')
        d++; /* int("007") == 7 */
    return digits_i64(d, end, neg, out) ? 0 : 1;
}

static int is_ascii(const unsigned char *p, const unsigned char *end) {
    for (; p < end; p++)
        if (*p >= 0x80)
            return 0;
    return 1;
}

/* An id value (flow id, correlation, External id) as as_int reads the decoded value.
 * *has: 1 when it is an int64, else 0.  allow_float: floats that are integral count
 * (args ids; the event's own id must be an integer or a string).  -1: give the run up. */
static int scan_id(Sc *s, int allow_float, int allow_any, int *is_null, int *has, int64_t *v) {
    *has = 0;
    *is_null = 0;
    ws(s);
    if (s->p >= s->end)
        return -1;
    unsigned c = *s->p;
    if (c == '"') {
        const unsigned char *at = s->p;
        int esc;
        if (scan_string(s, NULL, &esc) || esc)
            return -1;
        const unsigned char *b = at + 1, *e = s->p - 1;
        if (!is_ascii(b, e))
            return -1;
        int r = text_int(b, e, v);
        if (r < 0)
            return -1;
        *has = r;
        return 0;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        Num n;
        if (scan_number(s, &n))
            return -1;
        if (n.frac == n.frac_end && !n.has_exp) {
            *has = digits_i64(n.whole, n.whole_end, n.neg, v) == 0;
            return 0;
        }
        double f;
        if (!allow_float || number_double(&n, &f))
            return -1;
        if (isfinite(f) && f == floor(f) && fabs(f) < 9223372036854775808.0) {
            *v = (int64_t)f;
            *has = 1;
        }
        return 0;
    }
    if (c == 'n') {
        *is_null = 1;
        return literal(s, "null", 4);
    }
    if (!allow_any)
        return -1;
    return scan_value(s, 1); /* true/false, objects, arrays: present, not an int */
}

/* The columns, in the order scan() returns them: strings (offsets and data each), then
 * fixed-width ones. */
enum { PH, NAME, CAT, PID, TID, ARGS, NSTR };
enum { TS, TS_FLAG, DUR, FID, FID_OK, CORR, CORR_OK, EXT, EXT_OK, EV_START, EV_END, NNUM };

typedef struct {
    StrCol str[NSTR];
    Buf num[NNUM];
    Py_ssize_t n;
} Cols;

static const char *const CORR_KEYS[3] = {"correlation", "correlation id", "correlationId"};
static const char *const EXT_KEYS[3] = {"External id", "external id", "external_id"};

static const size_t CORR_LENS[3] = {11, 14, 13};
static const size_t EXT_LENS[3] = {11, 11, 11};

static int key_rank(const unsigned char *k, size_t len, const char *const keys[3],
                    const size_t lens[3]) {
    for (int i = 0; i < 3; i++)
        if (lens[i] == len && memcmp(k, keys[i], len) == 0)
            return i;
    return -1;
}

/* The args object: validated, its id keys read, then copied without whitespace. */
static int scan_args(Sc *s, Buf *out, int *corr_has, int64_t *corr, int *ext_has,
                     int64_t *ext) {
    int corr_rank = 3, ext_rank = 3;
    const unsigned char *start = s->p;
    if (s->p >= s->end || *s->p != '{')
        return -1;
    s->spaced = 0;
    if (opens_empty(s, '}'))
        return buf_put(out, "{}", 2);
    for (;;) {
        const unsigned char *k;
        size_t klen;
        int esc;
        if (member_key(s, &k, &klen, &esc))
            return -1;
        Buf key = {NULL, 0, 0};
        if (esc) { /* compare the key as decoded: an escape may spell an id key */
            Sc again = {k - 1, s->end, s->base, 0};
            if (scan_string(&again, &key, NULL)) {
                free(key.p);
                return -1;
            }
            k = (const unsigned char *)key.p;
            klen = key.len;
        }
        int cr = key_rank(k, klen, CORR_KEYS, CORR_LENS);
        int er = cr >= 0 ? -1 : key_rank(k, klen, EXT_KEYS, EXT_LENS);
        free(key.p);
        if (cr >= 0 || er >= 0) {
            int is_null, has;
            int64_t v = 0;
            if (scan_id(s, 1, 1, &is_null, &has, &v))
                return -1;
            if (cr >= 0 && cr <= corr_rank) {
                corr_rank = cr;
                *corr_has = has;
                *corr = v;
            } else if (er >= 0 && er <= ext_rank) {
                ext_rank = er;
                *ext_has = has;
                *ext = v;
            }
        } else if (scan_value(s, 1)) {
            return -1;
        }
        int more = next_member(s, '}');
        if (more < 0)
            return -1;
        if (!more)
            break;
    }
    if (!s->spaced)
        return buf_put(out, start, (size_t)(s->p - start));
    return copy_compact(out, start, s->p);
}

/* A string field (ph, name, cat): a string decoded into col, or null -> "". */
static int str_field(Sc *s, StrCol *col) {
    col->data.len = col->mark; /* a repeated key: the last one wins */
    if (s->p < s->end && *s->p == '"')
        return scan_string(s, &col->data, NULL);
    return literal(s, "null", 4);
}

/* pid / tid: a string decoded, an integer as its digits, null -> "". */
static int id_text_field(Sc *s, StrCol *col) {
    col->data.len = col->mark;
    if (s->p >= s->end)
        return -1;
    unsigned c = *s->p;
    if (c == '"')
        return scan_string(s, &col->data, NULL);
    if (c == 'n')
        return literal(s, "null", 4);
    Num n;
    if (scan_number(s, &n) || n.frac != n.frac_end || n.has_exp)
        return -1;
    if (n.neg && n.whole_end - n.whole == 1 && *n.whole == '0')
        return -1; /* -0 reads as 0 */
    return buf_put(&col->data, n.start, (size_t)(n.end - n.start));
}

/* ts: flag 0 read, 1 absent, 2 null. */
static int ts_field(Sc *s, int64_t *ns, uint8_t *flag) {
    if (s->p >= s->end)
        return -1;
    unsigned c = *s->p;
    if (c == 'n') {
        *flag = 2;
        *ns = 0;
        return literal(s, "null", 4);
    }
    if (c == '"') {
        const unsigned char *at = s->p;
        int esc;
        if (scan_string(s, NULL, &esc) || esc)
            return -1;
        Sc inner = {at + 1, s->p - 1, at + 1, 0};
        Num n;
        if (scan_number(&inner, &n) || inner.p != inner.end || n.has_exp)
            return -1; /* " 7", "007", "1e3": to_ns reads them; the run goes the Python way */
        if (!text_ns(n.neg, n.whole, n.whole_end, n.frac, n.frac_end, ns))
            return -1;
        *flag = 0;
        return 0;
    }
    Num n;
    if (scan_number(s, &n) || n.has_exp)
        return -1;
    if (!text_ns(n.neg, n.whole, n.whole_end, n.frac, n.frac_end, ns))
        return -1;
    *flag = 0;
    return 0;
}

static int dur_field(Sc *s, int64_t *ns) {
    if (s->p >= s->end)
        return -1;
    if (*s->p == 'n') {
        *ns = 0;
        return literal(s, "null", 4);
    }
    Num n;
    if (scan_number(s, &n) || n.has_exp)
        return -1;
    if (n.frac == n.frac_end) {
        int64_t v;
        if (digits_i64(n.whole, n.whole_end, n.neg, &v) || v >= US_LIMIT || v <= -US_LIMIT)
            return -1;
        *ns = v * 1000;
        return 0;
    }
    double f;
    if (number_double(&n, &f) || !isfinite(f) || fabs(f) >= LONG_FLOAT_US)
        return -1;
    double w = floor(f);
    double r = rint((f - w) * 1000.0);
    *ns = (int64_t)w * 1000 + (int64_t)r;
    return 0;
}

static int key_is(const unsigned char *k, size_t len, const char *word, size_t wlen) {
    return len == wlen && memcmp(k, word, wlen) == 0;
}

static int scan_event(Sc *s, Cols *c) {
    for (int i = 0; i < NSTR; i++)
        c->str[i].mark = c->str[i].data.len;
    int64_t ts = 0, dur = 0, id = 0, bind = 0, corr = 0, ext = 0;
    uint8_t ts_flag = 1;
    int id_set = 0, id_has = 0, bind_set = 0, bind_has = 0, corr_has = 0, ext_has = 0;
    int args_seen = 0;
    const unsigned char *start = s->p;
    if (s->p >= s->end || *s->p != '{')
        return -1;
    if (!opens_empty(s, '}')) {
        for (;;) {
            const unsigned char *k;
            size_t klen;
            int esc;
            if (member_key(s, &k, &klen, &esc) || esc)
                return -1; /* an escaped key might spell a field */
            ws(s);
            int r;
            if (key_is(k, klen, "ph", 2))
                r = str_field(s, &c->str[PH]);
            else if (key_is(k, klen, "name", 4))
                r = str_field(s, &c->str[NAME]);
            else if (key_is(k, klen, "cat", 3))
                r = str_field(s, &c->str[CAT]);
            else if (key_is(k, klen, "pid", 3))
                r = id_text_field(s, &c->str[PID]);
            else if (key_is(k, klen, "tid", 3))
                r = id_text_field(s, &c->str[TID]);
            else if (key_is(k, klen, "ts", 2))
                r = ts_field(s, &ts, &ts_flag);
            else if (key_is(k, klen, "dur", 3))
                r = dur_field(s, &dur);
            else if (key_is(k, klen, "id", 2) || key_is(k, klen, "bind_id", 7)) {
                int is_null, has;
                int64_t v = 0;
                r = scan_id(s, 0, 0, &is_null, &has, &v);
                if (klen == 2) {
                    id_set = !is_null;
                    id_has = has;
                    id = v;
                } else {
                    bind_set = !is_null;
                    bind_has = has;
                    bind = v;
                }
            } else if (key_is(k, klen, "args", 4)) {
                c->str[ARGS].data.len = c->str[ARGS].mark;
                corr_has = ext_has = 0;
                args_seen = 1;
                r = scan_args(s, &c->str[ARGS].data, &corr_has, &corr, &ext_has, &ext);
            } else
                r = scan_value(s, 1);
            if (r)
                return -1;
            int more = next_member(s, '}');
            if (more < 0)
                return -1;
            if (!more)
                break;
        }
    }
    if (!args_seen && buf_put(&c->str[ARGS].data, "{}", 2))
        return -1;
    for (int i = 0; i < NSTR; i++)
        if (strcol_end(&c->str[i]))
            return -1;
    int fid_has = id_set ? id_has : bind_set ? bind_has : 0;
    int64_t fid = id_set ? id : bind;
    Buf *num = c->num;
    if (buf_i64(&num[TS], ts) || buf_u8(&num[TS_FLAG], ts_flag) || buf_i64(&num[DUR], dur) ||
        buf_i64(&num[FID], fid_has ? fid : 0) || buf_u8(&num[FID_OK], (uint8_t)fid_has) ||
        buf_i64(&num[CORR], corr_has ? corr : 0) || buf_u8(&num[CORR_OK], (uint8_t)corr_has) ||
        buf_i64(&num[EXT], ext_has ? ext : 0) || buf_u8(&num[EXT_OK], (uint8_t)ext_has) ||
        buf_i64(&num[EV_START], (int64_t)(start - s->base)) ||
        buf_i64(&num[EV_END], (int64_t)(s->p - s->base)))
        return -1;
    c->n++;
    return 0;
}

static int scan_run(Sc *s, Cols *c) {
    for (int i = 0; i < NSTR; i++)
        if (strcol_init(&c->str[i]))
            return -1;
    ws(s);
    if (s->p >= s->end)
        return 0;
    for (;;) {
        if (scan_event(s, c))
            return -1;
        ws(s);
        if (s->p >= s->end)
            return 0;
        if (*s->p != ',')
            return -1;
        s->p++;
        ws(s);
    }
}

static void cols_free(Cols *c) {
    for (int i = 0; i < NSTR; i++) {
        free(c->str[i].offsets.p);
        free(c->str[i].data.p);
    }
    for (int i = 0; i < NNUM; i++)
        free(c->num[i].p);
}

static PyObject *as_bytes(Buf *b) {
    return PyBytes_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)b->len);
}

PyDoc_STRVAR(scan_doc,
             "scan(piece: bytes) -> tuple | None\n\n"
             "A run of trace events (comma-separated objects, no brackets) -> (n, then per "
             "string column ph, name, cat, pid, tid, args its int32 offsets and data, then "
             "ts_ns, ts_flag, dur_ns, flow_id, flow_id_ok, correlation, correlation_ok, "
             "external_id, external_id_ok, event_start, event_end) as bytes; None when the "
             "run holds anything outside the shapes this scanner reads.");

static PyObject *scan(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Cols c;
    memset(&c, 0, sizeof c);
    Sc s = {(const unsigned char *)view.buf, (const unsigned char *)view.buf + view.len,
            (const unsigned char *)view.buf, 0};
    int r;
    Py_BEGIN_ALLOW_THREADS r = scan_run(&s, &c);
    Py_END_ALLOW_THREADS PyBuffer_Release(&view);
    if (r) {
        cols_free(&c);
        Py_RETURN_NONE;
    }
    PyObject *out = PyTuple_New(1 + 2 * NSTR + NNUM);
    if (!out) {
        cols_free(&c);
        return NULL;
    }
    PyObject *item = PyLong_FromSsize_t(c.n);
    if (!item)
        goto fail;
    PyTuple_SET_ITEM(out, 0, item);
    for (int i = 0; i < NSTR; i++) {
        if (!(item = as_bytes(&c.str[i].offsets)))
            goto fail;
        PyTuple_SET_ITEM(out, 1 + 2 * i, item);
        if (!(item = as_bytes(&c.str[i].data)))
            goto fail;
        PyTuple_SET_ITEM(out, 2 + 2 * i, item);
    }
    for (int i = 0; i < NNUM; i++) {
        if (!(item = as_bytes(&c.num[i])))
            goto fail;
        PyTuple_SET_ITEM(out, 1 + 2 * NSTR + i, item);
    }
    cols_free(&c);
    return out;
fail:
    cols_free(&c);
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O, scan_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scan",
    "One run of Chrome-trace events -> column buffers (see opscope.trace.native).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
