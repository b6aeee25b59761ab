/* SPDX-License-Identifier: Apache-2.0 */
/* toml: see toml.h. A recursive-descent reader over a length-bounded
 * buffer; every loop advances the cursor, every nesting level is counted. */
#include "doctor-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"

struct parser {
        const char *s, *end;
        unsigned line;
        struct toml_doc *doc;
        size_t cap;
        char *table[TOML_MAX_DEPTH + 1]; /* current [table] path */
        size_t n_table;
};

/* A key path being built: components owned until handed to an entry. */
struct keypath {
        char *c[TOML_MAX_DEPTH + 1];
        size_t n;
};

static void keypath_clear(struct keypath *k) {
        for (size_t i = 0; i < k->n; i++)
                free(k->c[i]);
        k->n = 0;
}

static void value_clear(struct toml_value *v) {
        free(v->str);
        base_strv_free(v->strv);
        *v = (struct toml_value){ 0 };
}

static bool at_end(const struct parser *p) {
        return p->s >= p->end;
}
static char peek(const struct parser *p) {
        return at_end(p) ? '\0' : *p->s;
}
static bool starts(const struct parser *p, const char *lit) {
        size_t n = strlen(lit);
        return (size_t)(p->end - p->s) >= n && memcmp(p->s, lit, n) == 0;
}

static void skip_ws(struct parser *p) {
        while (!at_end(p) && (*p->s == ' ' || *p->s == '\t'))
                p->s++;
}

static void skip_comment(struct parser *p) {
        if (peek(p) == '#')
                while (!at_end(p) && *p->s != '\n')
                        p->s++;
}

/* Whitespace, comments and newlines, as between array elements. */
static void skip_ws_nl(struct parser *p) {
        for (;;) {
                skip_ws(p);
                skip_comment(p);
                if (peek(p) == '\r' && p->s + 1 < p->end && p->s[1] == '\n')
                        p->s++;
                if (peek(p) != '\n')
                        return;
                p->s++;
                p->line++;
        }
}

/* After a value or header: only a comment may follow on the line. */
static int end_of_line(struct parser *p) {
        skip_ws(p);
        skip_comment(p);
        if (peek(p) == '\r')
                p->s++;
        if (at_end(p))
                return 0;
        if (*p->s != '\n')
                return -EBADMSG;
        p->s++;
        p->line++;
        return 0;
}

/* Growable byte buffer for decoded strings. */
struct buf {
        char *b;
        size_t n, cap;
};

static int buf_put(struct buf *b, const char *data, size_t n) {
        if (b->n + n + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 32;
                while (cap < b->n + n + 1)
                        cap *= 2;
                char *nb = realloc(b->b, cap);
                if (!nb)
                        return -ENOMEM;
                b->b = nb;
                b->cap = cap;
        }
        memcpy(b->b + b->n, data, n);
        b->n += n;
        b->b[b->n] = '\0';
        return 0;
}

static int put_utf8(struct buf *b, uint32_t cp) {
        char u[4];
        size_t n;
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return -EBADMSG;
        if (cp < 0x80) {
                u[0] = (char)cp;
                n = 1;
        } else if (cp < 0x800) {
                u[0] = (char)(0xc0 | (cp >> 6));
                u[1] = (char)(0x80 | (cp & 0x3f));
                n = 2;
        } else if (cp < 0x10000) {
                u[0] = (char)(0xe0 | (cp >> 12));
                u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
                u[2] = (char)(0x80 | (cp & 0x3f));
                n = 3;
        } else {
                u[0] = (char)(0xf0 | (cp >> 18));
                u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
                u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
                u[3] = (char)(0x80 | (cp & 0x3f));
                n = 4;
        }
        return buf_put(b, u, n);
}

static int escape(struct parser *p, struct buf *b) {
        static const char from[] = "btnfr\"\\", to[] = "\b\t\n\f\r\"\\";
        char c = peek(p);
        const char *k = c ? strchr(from, c) : NULL;
        if (k) {
                p->s++;
                return buf_put(b, &to[k - from], 1);
        }
        if (c != 'u' && c != 'U')
                return -EBADMSG;
        size_t digits = c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        p->s++;
        if ((size_t)(p->end - p->s) < digits)
                return -EBADMSG;
        for (size_t i = 0; i < digits; i++, p->s++) {
                char h = *p->s;
                unsigned d = h >= '0' && h <= '9'   ? (unsigned)(h - '0')
                             : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                             : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10)
                                                    : 16;
                if (d == 16 || cp > 0x10ffff)
                        return -EBADMSG;
                cp = cp * 16 + d;
        }
        return put_utf8(b, cp);
}

/* Any of the four string kinds, cursor on the opening quote. */
static int string(struct parser *p, char **ret) {
        char q = *p->s;
        bool multi = starts(p, q == '"' ? "\"\"\"" : "'''");
        struct buf b = { 0 };
        int r = 0;

        p->s += multi ? 3 : 1;
        /* A newline right after the opening delimiter is trimmed. */
        if (multi && peek(p) == '\n') {
                p->s++;
                p->line++;
        } else if (multi && starts(p, "\r\n")) {
                p->s += 2;
                p->line++;
        }
        r = buf_put(&b, "", 0);
        while (r >= 0) {
                if (at_end(p)) {
                        r = -EBADMSG;
                        break;
                }
                char c = *p->s;
                if (c == q && (!multi || starts(p, q == '"' ? "\"\"\"" : "'''"))) {
                        p->s += multi ? 3 : 1;
                        /* Up to two quotes may directly precede the closing three. */
                        for (int extra = 0; multi && extra < 2 && peek(p) == q; extra++) {
                                r = buf_put(&b, &q, 1);
                                p->s++;
                        }
                        break;
                }
                if (c == '\n') {
                        if (!multi) {
                                r = -EBADMSG;
                                break;
                        }
                        p->line++;
                }
                p->s++;
                if (c == '\\' && q == '"') {
                        /* A line-ending backslash eats the newline and the
                         * whitespace after it. */
                        const char *t = p->s;
                        while (multi && t < p->end && (*t == ' ' || *t == '\t' || *t == '\r'))
                                t++;
                        if (multi && t < p->end && *t == '\n') {
                                p->s = t;
                                while (!at_end(p) && strchr(" \t\r\n", *p->s)) {
                                        if (*p->s == '\n')
                                                p->line++;
                                        p->s++;
                                }
                                continue;
                        }
                        r = escape(p, &b);
                        continue;
                }
                r = buf_put(&b, &c, 1);
        }
        if (r < 0) {
                free(b.b);
                return r;
        }
        *ret = b.b;
        return 0;
}

static bool bare_key_char(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
}

/* A dotted key: bare or quoted components separated by '.'. */
static int key(struct parser *p, struct keypath *k) {
        for (;;) {
                char *c = NULL;
                int r;
                skip_ws(p);
                if (peek(p) == '"' || peek(p) == '\'') {
                        if (starts(p, "\"\"\"") || starts(p, "'''"))
                                return -EBADMSG;
                        r = string(p, &c);
                        if (r < 0)
                                return r;
                } else {
                        const char *start = p->s;
                        while (!at_end(p) && bare_key_char(*p->s))
                                p->s++;
                        if (p->s == start)
                                return -EBADMSG;
                        c = strndup(start, (size_t)(p->s - start));
                        if (!c)
                                return -ENOMEM;
                }
                if (k->n == TOML_MAX_DEPTH) {
                        free(c);
                        return -E2BIG;
                }
                k->c[k->n++] = c;
                skip_ws(p);
                if (peek(p) != '.')
                        return 0;
                p->s++;
        }
}

static int value(struct parser *p, struct toml_value *v, struct keypath *prefix, unsigned depth);

static int add_entry(struct parser *p, const struct keypath *k, struct toml_value *v) {
        struct toml_doc *d = p->doc;
        size_t n = p->n_table + k->n;
        char **path;

        if (d->n == TOML_MAX_ENTRIES)
                return -E2BIG;
        if (n > TOML_MAX_DEPTH)
                return -E2BIG;
        if (d->n == p->cap) {
                size_t cap = p->cap ? p->cap * 2 : 16;
                struct toml_entry *e = realloc(d->entries, cap * sizeof(*e));
                if (!e)
                        return -ENOMEM;
                d->entries = e;
                p->cap = cap;
        }
        path = calloc(n + 1, sizeof(char *));
        if (!path)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                path[i] = strdup(i < p->n_table ? p->table[i] : k->c[i - p->n_table]);
                if (!path[i]) {
                        base_strv_free(path);
                        return -ENOMEM;
                }
        }
        d->entries[d->n++] = (struct toml_entry){ .path = path, .v = *v };
        *v = (struct toml_value){ 0 };
        return 0;
}

/* key = value, within the current table; prefix holds the keys of any
 * inline tables around it. */
/* NOLINTNEXTLINE(misc-no-recursion): nesting stops at TOML_MAX_DEPTH */
static int keyval(struct parser *p, struct keypath *prefix, unsigned depth) {
        struct keypath k = { 0 };
        struct toml_value v = { 0 };
        size_t base = prefix ? prefix->n : 0;
        int r;

        for (size_t i = 0; i < base; i++) {
                k.c[k.n] = strdup(prefix->c[i]);
                if (!k.c[k.n]) {
                        keypath_clear(&k);
                        return -ENOMEM;
                }
                k.n++;
        }
        r = key(p, &k);
        if (r >= 0 && peek(p) != '=')
                r = -EBADMSG;
        if (r >= 0) {
                p->s++;
                skip_ws(p);
                v.line = p->line;
                r = value(p, &v, &k, depth);
        }
        /* Inline tables add their own entries; they have no value of
         * their own to record. */
        if (r > 0)
                r = 0;
        else if (r == 0)
                r = add_entry(p, &k, &v);
        value_clear(&v);
        keypath_clear(&k);
        return r;
}

/* NOLINTNEXTLINE(misc-no-recursion): nesting stops at TOML_MAX_DEPTH */
static int array(struct parser *p, struct toml_value *v, unsigned depth) {
        struct base_strvec strv = { 0 };
        bool only_strings = true;
        int r = 0;

        if (depth >= TOML_MAX_DEPTH)
                return -E2BIG;
        p->s++; /* '[' */
        for (;;) {
                struct toml_value item = { 0 };
                skip_ws_nl(p);
                if (peek(p) == ']') {
                        p->s++;
                        break;
                }
                item.line = p->line;
                r = value(p, &item, NULL, depth + 1);
                if (r > 0) /* an inline table inside an array */
                        r = 0;
                if (r < 0)
                        break;
                if (item.type == TOML_STRING && only_strings) {
                        r = base_strvec_push(&strv, TAKE_PTR(item.str));
                } else
                        only_strings = false;
                value_clear(&item);
                if (r < 0)
                        break;
                skip_ws_nl(p);
                if (peek(p) == ',') {
                        p->s++;
                        continue;
                }
                if (peek(p) == ']') {
                        p->s++;
                        break;
                }
                r = -EBADMSG;
                break;
        }
        if (r < 0 || !only_strings) {
                base_strvec_clear(&strv);
                if (r >= 0)
                        v->type = TOML_OTHER;
                return r;
        }
        /* Possibly empty, never NULL. */
        if (!strv.v && !(strv.v = calloc(1, sizeof(char *))))
                return -ENOMEM;
        v->type = TOML_STRV;
        v->strv = base_strvec_take(&strv);
        return 0;
}

/* { k = v, ... } on one line: its keys become entries below prefix.
 * Returns 1 (no value of its own). */
/* NOLINTNEXTLINE(misc-no-recursion): nesting stops at TOML_MAX_DEPTH */
static int inline_table(struct parser *p, struct keypath *prefix, unsigned depth) {
        if (depth >= TOML_MAX_DEPTH)
                return -E2BIG;
        p->s++; /* '{' */
        skip_ws(p);
        if (peek(p) == '}') {
                p->s++;
                return 1;
        }
        for (;;) {
                struct keypath none = { 0 };
                int r = keyval(p, prefix ? prefix : &none, depth + 1);
                if (r < 0)
                        return r;
                skip_ws(p);
                if (peek(p) == ',') {
                        p->s++;
                        continue;
                }
                if (peek(p) == '}') {
                        p->s++;
                        return 1;
                }
                return -EBADMSG;
        }
}

/* Numbers, dates, inf/nan: a run of characters up to a delimiter. */
static int scalar(struct parser *p, struct toml_value *v) {
        const char *start = p->s;
        while (!at_end(p) && !strchr(" \t\r\n,]}#", *p->s))
                p->s++;
        size_t n = (size_t)(p->s - start);
        if (n == 0)
                return -EBADMSG;
        if (n == 4 && memcmp(start, "true", 4) == 0) {
                v->type = TOML_BOOL;
                v->b = true;
                return 0;
        }
        if (n == 5 && memcmp(start, "false", 5) == 0) {
                v->type = TOML_BOOL;
                return 0;
        }
        /* Decimal integers (with '_' between digits); anything else is
         * kept as "other" but must at least be made of plausible characters. */
        size_t i = start[0] == '+' || start[0] == '-' ? 1 : 0;
        bool digits = i < n;
        long long val = 0;
        for (size_t j = i; j < n && digits; j++) {
                if (start[j] == '_' && j > i && j + 1 < n && start[j + 1] != '_')
                        continue;
                if (start[j] < '0' || start[j] > '9' || val > (LLONG_MAX - 9) / 10)
                        digits = false;
                else
                        val = val * 10 + (start[j] - '0');
        }
        if (digits) {
                v->type = TOML_INT;
                v->i = start[0] == '-' ? -val : val;
                return 0;
        }
        for (size_t j = 0; j < n; j++)
                if (!bare_key_char(start[j]) && !strchr("+.:", start[j]))
                        return -EBADMSG;
        v->type = TOML_OTHER;
        return 0;
}

/* Returns 1 for an inline table (its keys already added), 0 for a value. */
/* NOLINTNEXTLINE(misc-no-recursion): nesting stops at TOML_MAX_DEPTH */
static int value(struct parser *p, struct toml_value *v, struct keypath *prefix, unsigned depth) {
        char c = peek(p);
        if (c == '"' || c == '\'') {
                v->type = TOML_STRING;
                return string(p, &v->str);
        }
        if (c == '[')
                return array(p, v, depth);
        if (c == '{') {
                if (!prefix) {
                        /* In an array: a table we do not keep, but read. */
                        struct keypath scratch = { 0 };
                        scratch.c[0] = strdup("");
                        if (!scratch.c[0])
                                return -ENOMEM;
                        scratch.n = 1;
                        size_t before = p->doc->n;
                        int r = inline_table(p, &scratch, depth);
                        keypath_clear(&scratch);
                        /* Drop what it added: its keys have no path of their own. */
                        while (p->doc->n > before) {
                                struct toml_entry *e = &p->doc->entries[--p->doc->n];
                                base_strv_free(e->path);
                                value_clear(&e->v);
                        }
                        v->type = TOML_OTHER;
                        return r < 0 ? r : 0;
                }
                return inline_table(p, prefix, depth);
        }
        return scalar(p, v);
}

static void table_clear(struct parser *p) {
        for (size_t i = 0; i < p->n_table; i++)
                free(p->table[i]);
        p->n_table = 0;
}

static int header(struct parser *p) {
        bool arr = starts(p, "[[");
        struct keypath k = { 0 };
        int r;

        p->s += arr ? 2 : 1;
        r = key(p, &k);
        if (r >= 0 && !(arr ? starts(p, "]]") : peek(p) == ']'))
                r = -EBADMSG;
        if (r < 0) {
                keypath_clear(&k);
                return r;
        }
        p->s += arr ? 2 : 1;
        table_clear(p);
        for (size_t i = 0; i < k.n; i++)
                p->table[i] = k.c[i];
        p->n_table = k.n;
        return end_of_line(p);
}

void toml_doc_free(struct toml_doc *doc) {
        if (!doc)
                return;
        for (size_t i = 0; i < doc->n; i++) {
                base_strv_free(doc->entries[i].path);
                value_clear(&doc->entries[i].v);
        }
        free(doc->entries);
        *doc = (struct toml_doc){ 0 };
}

int toml_parse(const char *text, size_t len, struct toml_doc *ret, unsigned *ret_line) {
        struct toml_doc doc = { 0 };
        struct parser p = { .s = text, .end = text + len, .line = 1, .doc = &doc };
        int r = 0;

        if (len > TOML_MAX_BYTES)
                return -E2BIG;
        /* A UTF-8 byte order mark is allowed before the first line. */
        if (starts(&p, "\xef\xbb\xbf"))
                p.s += 3;
        while (r >= 0) {
                skip_ws_nl(&p);
                if (at_end(&p))
                        break;
                if (*p.s == '[')
                        r = header(&p);
                else {
                        r = keyval(&p, NULL, 0);
                        if (r >= 0)
                                r = end_of_line(&p);
                }
        }
        table_clear(&p);
        if (r < 0) {
                if (ret_line)
                        *ret_line = p.line;
                toml_doc_free(&doc);
                return r;
        }
        *ret = doc;
        return 0;
}

int toml_load(const char *path, struct toml_doc *ret, unsigned *ret_line) {
        _cleanup_free_ char *text = NULL;
        size_t n = 0;
        int r = base_read_file_at(AT_FDCWD, path, 0, TOML_MAX_BYTES, &text, &n);

        if (r == -EFBIG)
                return -E2BIG;
        if (r < 0)
                return r;
        return toml_parse(text, n, ret, ret_line);
}

const struct toml_value *toml_get(const struct toml_doc *doc, const char *const *path) {
        for (size_t i = doc->n; i-- > 0;) {
                char **e = doc->entries[i].path;
                size_t j = 0;
                while (e[j] && path[j] && strcmp(e[j], path[j]) == 0)
                        j++;
                if (!e[j] && !path[j])
                        return &doc->entries[i].v;
        }
        return NULL;
}
