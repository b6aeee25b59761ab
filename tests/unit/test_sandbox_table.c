/* SPDX-License-Identifier: Apache-2.0 */
/* sandbox/: the seccomp table as data. SECURITY.md's copy must match it
 * row for row, and the denylist must hold every call issue 5 names. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox.h"

#ifndef CDIPLUG_SRC_DIR
#error "CDIPLUG_SRC_DIR must point at the source tree (SECURITY.md)"
#endif

static const char *const action_word[] = {
        [SBX_ALLOW] = "allow",
        [SBX_ENOSYS] = "ENOSYS",
        [SBX_KILL] = "kill",
};

static const struct sbx_syscall_group *find_call(const char *name, size_t *ret_count) {
        size_t n, count = 0;
        const struct sbx_syscall_group *g = sbx_syscall_groups(&n), *found = NULL;

        for (size_t i = 0; i < n; i++) {
                char *names = strdup(g[i].syscalls), *save = NULL;

                cr_assert_not_null(names);
                for (char *s = strtok_r(names, " ", &save); s; s = strtok_r(NULL, " ", &save))
                        if (strcmp(s, name) == 0) {
                                found = &g[i];
                                count++;
                        }
                free(names);
        }
        *ret_count = count;
        return found;
}

Test(sbx_table, denylist_is_complete_and_kills) {
        static const char *const deny[] = {
                "execve",
                "execveat",
                "ptrace",
                "mount",
                "umount2",
                "pivot_root",
                "init_module",
                "finit_module",
                "bpf",
                "kexec_load",
                "setuid",
                "setgid",
                "setreuid",
                "setregid",
                "setresuid",
                "setresgid",
                "setgroups",
                "setfsuid",
                "setfsgid",
                "unshare",
                "setns",
                "keyctl",
                "process_vm_writev",
        };

        for (size_t i = 0; i < sizeof(deny) / sizeof(deny[0]); i++) {
                size_t count;
                const struct sbx_syscall_group *g = find_call(deny[i], &count);

                cr_assert_not_null(g, "%s is not in the table", deny[i]);
                cr_assert_eq(g->action, SBX_KILL, "%s is in group %s, which does not kill", deny[i],
                             g->group);
        }
}

/* libseccomp refuses two rules for one call with different actions; and a
 * call listed twice is a table nobody can read, unless the second listing
 * is a group of its own for one feature (api-sockets' socket). */
static bool lists(const struct sbx_syscall_group *g, const char *name) {
        size_t len = strlen(name);

        for (const char *p = g->syscalls; (p = strstr(p, name)); p += len)
                if ((p == g->syscalls || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0'))
                        return true;
        return false;
}

Test(sbx_table, no_call_is_listed_twice) {
        size_t n;
        const struct sbx_syscall_group *g = sbx_syscall_groups(&n);

        for (size_t i = 0; i < n; i++) {
                char *names = strdup(g[i].syscalls), *save = NULL;

                cr_assert_not_null(names);
                cr_assert(g[i].group && *g[i].group && g[i].who && *g[i].who);
                for (char *s = strtok_r(names, " ", &save); s; s = strtok_r(NULL, " ", &save)) {
                        size_t count;

                        const struct sbx_syscall_group *first = find_call(s, &count);
                        size_t api = 0;

                        for (size_t j = 0; j < n; j++)
                                api += (g[j].arg == SBX_ARG_INET || g[j].arg == SBX_ARG_API) &&
                                       lists(&g[j], s);
                        cr_assert(count - api <= 1 && api <= 1, "%s is listed %zu times", s, count);
                        cr_assert_eq(first->action, g[i].action, "%s has two actions", s);
                }
                free(names);
        }
}

/* Split "| a | b | c |" into trimmed cells, in place. */
static size_t cells(char *line, char **out, size_t max) {
        size_t n = 0;
        char *p = strchr(line, '|');

        while (p && n < max) {
                char *start = p + 1, *end = strchr(start, '|');

                if (!end)
                        break;
                *end = '\0';
                while (*start == ' ')
                        start++;
                for (char *e = end - 1; e >= start && *e == ' '; e--)
                        *e = '\0';
                out[n++] = start;
                p = end;
        }
        return n;
}

Test(sbx_table, security_md_matches) {
        FILE *f = fopen(CDIPLUG_SRC_DIR "/SECURITY.md", "re");
        char *line = NULL;
        size_t cap = 0, n, rows = 0;
        const struct sbx_syscall_group *g = sbx_syscall_groups(&n);
        bool in_table = false;

        cr_assert_not_null(f, "cannot open SECURITY.md");
        while (getline(&line, &cap, f) > 0) {
                if (strstr(line, "<!-- syscall-table-begin -->")) {
                        in_table = true;
                        continue;
                }
                if (strstr(line, "<!-- syscall-table-end -->"))
                        break;
                if (!in_table || strncmp(line, "| `", 3) != 0)
                        continue;

                char *c[5];
                cr_assert_eq(cells(line, c, 5), 5, "bad row: %s", line);
                cr_assert_lt(rows, n, "SECURITY.md has more rows than the table");
                char want[64];
                snprintf(want, sizeof(want), "`%s`", g[rows].group);
                cr_assert_str_eq(c[0], want, "row %zu", rows);
                cr_assert_str_eq(c[1], action_word[g[rows].action], "row %s", want);
                cr_assert_str_eq(c[3], g[rows].syscalls, "row %s", want);
                rows++;
        }
        free(line);
        fclose(f);
        cr_assert(in_table, "SECURITY.md has no syscall table markers");
        cr_assert_eq(rows, n, "SECURITY.md has %zu rows, the table %zu", rows, n);
}
