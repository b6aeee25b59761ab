/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's docs keep up with the binary: the man page renders
 * without warnings and names every command and option `cdiplug --help`
 * lists, and the bash completion offers them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

#define MAN_PAGE CDIPLUG_BUILD_DIR "/packaging/cdiplug.8"
#define COMPLETION CDIPLUG_SRC_DIR "/packaging/cdiplug.bash-completion"

static struct env e;

static void start(void) {
        env_init(&e);
}
static void stop(void) {
        env_cleanup(&e);
}

TestSuite(docs, .init = start, .fini = stop, .timeout = 60);

/* Output (stdout and stderr) of a shell command line, and its status. */
static char *run(const char *cmd, int *ret_status) {
        /* The test's own fixed command lines (man, groff) on files of this
         * tree, never daemon input. NOLINTNEXTLINE(cert-env33-c) */
        FILE *f = popen(cmd, "r");
        char *out = NULL;
        size_t n = 0;
        cr_assert_not_null(f, "%s", cmd);
        FILE *m = open_memstream(&out, &n);
        char buf[4096];
        size_t k;
        while ((k = fread(buf, 1, sizeof(buf), f)) > 0)
                fwrite(buf, 1, k, m);
        fclose(m);
        int status = pclose(f);
        if (ret_status)
                *ret_status = status;
        return out;
}

Test(docs, man_page_renders_without_warnings) {
        int status;
        char *err =
                run("LC_ALL=C.UTF-8 groff -ww -man -Tutf8 " MAN_PAGE " 2>&1 >/dev/null", &status);
        cr_assert_eq(status, 0, "groff failed: %s", err);
        cr_assert_str_empty(err, "groff -ww warns:\n%s", err);
        free(err);
}

/* Every "--option" and every command the usage text lists. */
static void each_word_of_usage(void (*fn)(const char *word, void *ud), void *ud) {
        char *usage = NULL;
        cr_assert_eq(env_run(&e, &usage, "--help", NULL), 0);
        bool in_commands = false;
        for (char *save = NULL, *line = strtok_r(usage, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
                if (strcmp(line, "Commands:") == 0) {
                        in_commands = true;
                        continue;
                }
                if (strcmp(line, "Options:") == 0)
                        in_commands = false;
                char word[64];
                if (in_commands && sscanf(line, " %63s", word) == 1)
                        fn(word, ud);
                for (char *p = line; (p = strstr(p, "--")); p += 2) {
                        size_t len = strspn(p, "-abcdefghijklmnopqrstuvwxyz");
                        snprintf(word, sizeof(word), "%.*s", (int)len, p);
                        fn(word, ud);
                }
        }
        free(usage);
}

static void in_man_page(const char *word, void *ud) {
        const char *man = ud;
        char escaped[128];
        size_t n = 0;
        /* roff writes a literal '-' as "\-". */
        for (const char *w = word; *w && n + 3 < sizeof(escaped); w++) {
                if (*w == '-')
                        escaped[n++] = '\\';
                escaped[n++] = *w;
        }
        escaped[n] = '\0';
        char pattern[160];
        snprintf(pattern, sizeof(pattern), "%s\n", escaped);
        bool found = strstr(man, pattern) != NULL;
        snprintf(pattern, sizeof(pattern), "%s ", escaped);
        found |= strstr(man, pattern) != NULL;
        cr_assert(found, "the man page does not document \"%s\"", word);
}

Test(docs, man_page_documents_every_command_and_option) {
        char *man = env_read(MAN_PAGE);
        cr_assert_not_null(man);
        each_word_of_usage(in_man_page, man);
        free(man);
}

static void in_completion(const char *word, void *ud) {
        const char *comp = ud;
        char pattern[80];
        snprintf(pattern, sizeof(pattern), "%s ", word);
        cr_assert(strstr(comp, pattern) || strstr(comp, word), "the bash completion lacks \"%s\"",
                  word);
}

Test(docs, bash_completion_offers_commands_and_their_options) {
        char *comp = env_read(COMPLETION);
        cr_assert_not_null(comp);
        each_word_of_usage(in_completion, comp);
        free(comp);

        char *out = run("bash -c 'source " COMPLETION
                        "; COMP_WORDS=(cdiplug d); COMP_CWORD=1; _cdiplug;"
                        " printf \"%s\\n\" \"${COMPREPLY[@]}\"' 2>&1",
                        NULL);
        cr_assert_str_eq(out, "doctor\n");
        free(out);
        out = run("bash -c 'source " COMPLETION
                  "; COMP_WORDS=(cdiplug doctor --); COMP_CWORD=2; _cdiplug;"
                  " printf \"%s\\n\" \"${COMPREPLY[@]}\"' 2>&1",
                  NULL);
        cr_assert_not_null(strstr(out, "--json\n"), "%s", out);
        cr_assert_not_null(strstr(out, "--host-root\n"), "%s", out);
        cr_assert_null(strstr(out, "--stdout"), "doctor has no --stdout: %s", out);
        free(out);
        out = run("bash -c 'source " COMPLETION
                  "; COMP_WORDS=(cdiplug serve --kubelet-dir /e); COMP_CWORD=3;"
                  " _cdiplug; printf \"%s\\n\" \"${COMPREPLY[@]}\"' 2>&1",
                  NULL);
        cr_assert_str_eq(out, "/etc\n", "directories for a dir option: %s", out);
        free(out);
}

/* The completion offers each command exactly the options its synopsis
 * lists (and --help). */
Test(docs, bash_completion_offers_each_command_its_own_options) {
        static const char *const cmds[] = { "serve",  "check",     "generate",
                                            "doctor", "manifests", "version" };
        for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
                char *help = NULL, cmdline[512];
                cr_assert_eq(env_run(&e, &help, cmds[i], "--help", NULL), 0);
                char *end = strstr(help, "\n\n");
                cr_assert_not_null(end, "%s", help);
                *end = '\0';
                snprintf(cmdline, sizeof(cmdline),
                         "bash -c 'source " COMPLETION "; COMP_WORDS=(cdiplug %s --); COMP_CWORD=2;"
                         " _cdiplug; printf \"%%s\\n\" \"${COMPREPLY[@]}\"' 2>&1",
                         cmds[i]);
                char *offered = run(cmdline, NULL);
                size_t n_offered = 0;
                for (char *save = NULL, *w = strtok_r(offered, "\n", &save); w;
                     w = strtok_r(NULL, "\n", &save)) {
                        char bracket[64];
                        n_offered++;
                        if (strcmp(w, "--help") == 0)
                                continue;
                        /* "[--opt" in the synopsis, followed by ' ' or ']'. */
                        snprintf(bracket, sizeof(bracket), "[%s", w);
                        const char *at = help;
                        bool found = false;
                        while (!found && (at = strstr(at, bracket))) {
                                at += strlen(bracket);
                                found = *at == ' ' || *at == ']';
                        }
                        cr_assert(found, "the completion offers %s %s, its synopsis does not: %s",
                                  cmds[i], w, help);
                }
                size_t n_synopsis = 1; /* --help */
                for (const char *p = help; (p = strstr(p, "[--")); p += 3)
                        n_synopsis++;
                cr_assert_eq(n_offered, n_synopsis,
                             "%s: the completion offers %zu options, the synopsis lists %zu: %s",
                             cmds[i], n_offered, n_synopsis, help);
                free(offered);
                free(help);
        }
}
