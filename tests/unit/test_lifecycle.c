/* SPDX-License-Identifier: Apache-2.0 */
/* A resource's lifetime (serve/resource.c, serve/specs.c) alone, on a small daemon
 * struct: no grpc, no kubelet, a fake host root and temp dirs. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdi.h"
#include "config.h"
#include "faketree.h"
#include "plugin.h"
#include "serve-internal.h"

struct fixture {
        char *root, *kubelet_dir, *cdi_dir;
        struct dp_options opts;
        struct dp_daemon d;
};

static const char config[] = "{ \"resources\": [ { \"name\": \"example.com/serial\", \"match\": "
                             "[ { \"path\": \"/dev/ttyUSB*\" } ] } ] }";

static void node(const char *root, const char *path) {
        unsigned major, minor;
        ft_next_devnum(&major, &minor);
        cr_assert_eq(ft_chrdev(root, path, major, minor), 0, "%s", path);
}

static void never(void *ctx) {
        cr_assert_fail("no timer is due in these tests");
}

static void setup(struct fixture *f) {
        struct base_field_error err = { 0 };

        *f = (struct fixture){ 0 };
        f->root = ft_new();
        f->kubelet_dir = ft_new();
        f->cdi_dir = ft_new();
        cr_assert(f->root && f->kubelet_dir && f->cdi_dir);
        cr_assert_eq(ft_dir(f->root, "dev"), 0);
        node(f->root, "dev/ttyUSB0");
        f->opts = (struct dp_options){
                .kubelet_dir = f->kubelet_dir,
                .cdi_dir = f->cdi_dir,
                .host_root = f->root,
        };
        f->d = (struct dp_daemon){ .opts = &f->opts, .loop = { .fd = -1 } };
        /* A spec write that fails would set its retry timer. */
        dp_timer_add(&f->d.loop, &f->d.spec_timer, never, NULL);
        cr_assert_eq(cfg_parse(config, strlen(config), &f->d.cfg, &err), 0, "%s: %s",
                     err.field ? err.field : "", err.msg ? err.msg : "");
        cr_assert_eq(dp_names_prepare(f->d.cfg, f->kubelet_dir, true), 0);
}

static void teardown(struct fixture *f) {
        dp_retired_free_all(&f->d);
        cfg_free(f->d.cfg);
        ft_free(f->root);
        ft_free(f->kubelet_dir);
        ft_free(f->cdi_dir);
}

static bool spec_on_disk(struct fixture *f, const struct dp_resource *res) {
        char *path = NULL;
        struct stat st;
        bool there;

        cr_assert_str_eq(res->cfg->spec_file, "example.com-serial.json");
        cr_assert_geq(asprintf(&path, "%s/%s", f->cdi_dir, res->cfg->spec_file), 0);
        there = stat(path, &st) == 0 && S_ISREG(st.st_mode);
        free(path);
        return there;
}

Test(lifecycle, new_then_refresh_finds_devices_and_writes_the_spec_first) {
        struct fixture f;
        struct dp_resource *res = NULL;
        bool changed = false;
        char *sock = NULL;

        setup(&f);
        cr_assert_eq(dp_resource_new(&f.d, &f.d.cfg->resources[0], &res), 0);
        cr_assert_geq(asprintf(&sock, "%s/%s", f.kubelet_dir, f.d.cfg->resources[0].socket_name),
                      0);
        cr_expect_str_eq(res->socket_path, sock);
        cr_expect_eq(res->srv.listen_fd, -1);
        cr_expect_eq(res->plugin->n_devs, 0, "nothing discovered yet");
        cr_expect_not(spec_on_disk(&f, res));

        cr_assert_eq(dp_resource_refresh(res, &changed), 0);
        cr_expect(changed);
        cr_expect_eq(res->plugin->n_devs, 1);
        cr_expect(spec_on_disk(&f, res));
        cr_expect_eq(res->stats.spec_writes_ok, 1);

        cr_assert_eq(dp_resource_refresh(res, &changed), 0);
        cr_expect_not(changed, "same devices: no change, no write");
        cr_expect_eq(res->stats.spec_writes_ok, 1);

        node(f.root, "dev/ttyUSB1");
        cr_assert_eq(dp_resource_refresh(res, &changed), 0);
        cr_expect(changed);
        cr_expect_eq(res->plugin->n_devs, 2);
        cr_expect_eq(res->stats.spec_writes_ok, 2);

        dp_resource_free(res);
        free(sock);
        teardown(&f);
}

Test(lifecycle, new_writes_nothing_on_failure) {
        struct fixture f;
        struct dp_resource *res = (struct dp_resource *)&f; /* must stay */
        char *long_dir = malloc(200);

        setup(&f);
        memset(long_dir, 'k', 199);
        long_dir[0] = '/';
        long_dir[199] = '\0';
        f.opts.kubelet_dir = long_dir;
        cr_expect_eq(dp_resource_new(&f.d, &f.d.cfg->resources[0], &res), -ENAMETOOLONG);
        cr_expect_eq(res, (struct dp_resource *)&f, "ret written only on success");
        free(long_dir);
        teardown(&f);
}

Test(lifecycle, a_retired_resource_outlives_its_config_until_its_last_call) {
        struct fixture f;
        struct dp_resource *res = NULL;
        struct cfg_resource *room = calloc(1, sizeof(*room));
        bool changed;

        setup(&f);
        cr_assert_not_null(room);
        cr_assert_eq(dp_resource_new(&f.d, &f.d.cfg->resources[0], &res), 0);
        cr_assert_eq(dp_resource_refresh(res, &changed), 0);
        res->life.calls = 1; /* an answer still on its way */

        dp_resource_own_cfg(res, room);
        dp_resource_retire(res);
        cr_expect(res->life.retired);
        cr_expect_eq(f.d.retired, res);
        cr_expect_eq(res->cfg, room);
        cr_expect_eq(res->life.owned_cfg, room);
        /* The config it came from goes, as after a reload. */
        cfg_free(f.d.cfg);
        f.d.cfg = NULL;
        cr_expect_str_eq(res->cfg->name, "example.com/serial");
        cr_expect_str_eq(res->plugin->cfg->name, "example.com/serial");

        dp_resource_maybe_free(res);
        cr_expect_eq(f.d.retired, res, "a call still points at it");
        res->life.calls = 0;
        dp_resource_maybe_free(res);
        cr_expect_null(f.d.retired, "freed once nothing points at it");
        teardown(&f);
}

Test(lifecycle, a_retired_resource_waits_for_its_server_and_its_register) {
        struct fixture f;
        struct dp_resource *res = NULL;
        struct cfg_resource *room = calloc(1, sizeof(*room));

        setup(&f);
        cr_assert_not_null(room);
        cr_assert_eq(dp_resource_new(&f.d, &f.d.cfg->resources[0], &res), 0);
        dp_resource_maybe_free(res);
        /* Not retired: left alone (ASan would see the use after a free). */

        res->srv.state = SRV_STOPPING; /* its server's shutdown still on its way */
        dp_resource_own_cfg(res, room);
        dp_resource_retire(res);
        dp_resource_maybe_free(res);
        cr_expect_eq(f.d.retired, res, "its server is still stopping");
        res->srv.state = SRV_DOWN;
        res->registration.call = (struct dp_reg *)&f; /* a Register in flight */
        dp_resource_maybe_free(res);
        cr_expect_eq(f.d.retired, res, "its Register is still in flight");
        res->registration.call = NULL;
        dp_resource_maybe_free(res);
        cr_expect_null(f.d.retired, "freed once both are done");
        teardown(&f);
}

Test(lifecycle, retired_free_all_frees_what_is_still_winding_down) {
        struct fixture f;
        struct dp_resource *a = NULL, *b = NULL;
        struct cfg_resource *ra = calloc(1, sizeof(*ra)), *rb = calloc(1, sizeof(*rb));
        static const char two[] =
                "{ \"resources\": [ { \"name\": \"example.com/a\", \"match\": [ { \"path\": "
                "\"/dev/ttyUSB*\" } ] }, { \"name\": \"example.com/b\", \"match\": [ { \"path\": "
                "\"/dev/ttyUSB*\" } ] } ] }";
        struct base_field_error err = { 0 };

        setup(&f);
        cfg_free(f.d.cfg);
        cr_assert_eq(cfg_parse(two, strlen(two), &f.d.cfg, &err), 0);
        cr_assert_eq(dp_names_prepare(f.d.cfg, f.kubelet_dir, true), 0);
        cr_assert(ra && rb);
        cr_assert_eq(dp_resource_new(&f.d, &f.d.cfg->resources[0], &a), 0);
        cr_assert_eq(dp_resource_new(&f.d, &f.d.cfg->resources[1], &b), 0);
        a->life.calls = 2;
        b->life.calls = 1;
        dp_resource_own_cfg(a, ra);
        dp_resource_retire(a);
        dp_resource_own_cfg(b, rb);
        dp_resource_retire(b);
        cr_expect_eq(f.d.retired, b);
        cr_expect_eq(b->life.next_retired, a);
        dp_retired_free_all(&f.d);
        cr_expect_null(f.d.retired);
        teardown(&f);
}
