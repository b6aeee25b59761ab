/* SPDX-License-Identifier: Apache-2.0 */
/* cdiplug: command line. Exit codes: 0 success, 1 runtime failure,
 * 2 usage or configuration error (nothing written). */
#include <getopt.h>
#include <grpc/grpc.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "cdi.h"
#include "config.h"
#include "daemon.h"
#include "doctor.h"
#include "lint.h"
#include "names.h"
#include "notes.h"
#include "options.h"
#include "plugin.h"
#include "resources.h"
#include "util.h"

#define DEFAULT_CONFIG "/etc/cdiplug/config.json"
#define DEFAULT_KUBELET_DIR "/var/lib/kubelet/device-plugins"
#define DEFAULT_CDI_DIR "/etc/cdi"

static const char usage[] =
        "Usage: cdiplug COMMAND [OPTIONS]\n"
        "\n"
        "Expose host devices to Kubernetes pods through the kubelet's device\n"
        "plugin API, with CDI specs for the container runtime.\n"
        "\n"
        "Commands:\n"
        "  serve      run the device plugin daemon\n"
        "  check      validate the configuration (and the devices it finds) and exit\n"
        "  generate   discover devices once, write the CDI specs and exit\n"
        "  doctor     check this node and explain what stands in the way (read-only)\n"
        "  version    print the version\n"
        "\n"
        "Options:\n"
        "  --config FILE        configuration (default " DEFAULT_CONFIG ")\n"
        "  --kubelet-dir DIR    kubelet device-plugin dir (default " DEFAULT_KUBELET_DIR ")\n"
        "  --cdi-dir DIR        where CDI specs go (default " DEFAULT_CDI_DIR ")\n"
        "  --host-root DIR      read /dev and /sys under DIR (default /)\n"
        "  --user NAME|UID[:GID]  serve as this identity (default: uid 0, no capabilities)\n"
        "  --metrics-address HOST:PORT  serve /metrics, /healthz, /readyz there (\"\": off;\n"
        "                       default: the config's metrics.address, else off;\n"
        "                       doctor: ask the daemon's /readyz there)\n"
        "  --pod-resources-socket PATH  kubelet PodResources socket, for pod labels and\n"
        "                       to tell when a spec no resource owns may go (\"\": off)\n"
        "                       (default " DP_DEFAULT_PODRES_SOCKET ")\n"
        "  --log-format text|json  log lines as text (default) or JSON objects\n"
        "  --stdout             generate: print the specs instead of writing them\n"
        "  --json               doctor: print the report as JSON\n"
        "  --no-sandbox         serve without the lock-down (debugging only)\n"
        "  --verbose            log debug messages\n"
        "  -h, --help           show this help\n";

enum {
        OPT_CONFIG = 1,
        OPT_KUBELET_DIR,
        OPT_CDI_DIR,
        OPT_HOST_ROOT,
        OPT_USER,
        OPT_STDOUT,
        OPT_NO_SANDBOX,
        OPT_VERBOSE,
        OPT_METRICS_ADDRESS,
        OPT_PODRES_SOCKET,
        OPT_JSON,
        OPT_LOG_FORMAT
};

static int load_config(const struct dp_options *o, struct cfg_config **ret) {
        struct cfg_error err = { 0 };
        int r = cfg_load(o->config_path, ret, &err);

        if (r < 0 && err.msg) {
                if (err.field && *err.field)
                        fprintf(stderr, "cdiplug: error: %s: %s: %s\n", o->config_path, err.field,
                                err.msg);
                else
                        fprintf(stderr, "cdiplug: error: %s: %s\n", o->config_path, err.msg);
        } else if (r < 0)
                fprintf(stderr, "cdiplug: error: %s: %s\n", o->config_path, strerror(-r));
        cfg_error_clear(&err);
        return r;
}

/* Valid, but probably not what the operator meant: said, not refused. */
static void check_warnings(const struct cfg_config *cfg) {
        for (size_t i = 0; i < cfg->n_resources; i++)
                for (size_t j = 0; j < cfg->resources[i].n_selectors; j++) {
                        const char *field = NULL;
                        const char *w =
                                res_selector_warning(cfg->resources[i].selectors[j], &field);
                        if (w)
                                fprintf(stderr,
                                        "cdiplug: warning: resources[%zu].match[%zu].%s: %s\n", i,
                                        j, field, w);
                }
}

/* Build every resource's spec once, outside the daemon: for podman and
 * other CDI users that have no kubelet. */
static int generate(const struct dp_options *o, const struct cfg_config *cfg, bool to_stdout) {
        size_t written = 0, empty = 0;

        for (size_t i = 0; i < cfg->n_resources; i++) {
                const struct cfg_resource *rc = &cfg->resources[i];
                struct dp_plugin *p = NULL;
                struct res_devlist found = { 0 };
                struct cdi_spec spec = { 0 };
                _cleanup_free_ char *json = NULL;
                bool changed;
                int r;

                r = dp_plugin_new(rc, &p);
                if (r >= 0)
                        r = res_discover(o->host_root, rc->selectors, rc->n_selectors, &found);
                if (r >= 0)
                        r = dp_plugin_update(p, &found, &changed);
                if (r >= 0) {
                        char **logged = NULL;
                        r = dp_notes_log(&logged, rc->name, &found, p);
                        base_strv_free(logged);
                }
                if (r >= 0 && p->n_devs == 0) {
                        /* A spec without devices is invalid for every
                         * runtime: say so and write none. */
                        log_warn("resource \"%s\": no matching devices, no CDI spec", rc->name);
                        empty++;
                        res_devlist_free(&found);
                        dp_plugin_free(p);
                        continue;
                }
                if (r >= 0)
                        r = dp_plugin_spec(p, &spec);
                if (r >= 0 && to_stdout) {
                        r = cdi_spec_to_json(&spec, &json);
                        if (r >= 0)
                                printf("%s\n", json);
                } else if (r >= 0)
                        r = cdi_spec_write(o->cdi_dir, &spec);
                if (r < 0)
                        log_error("resource \"%s\": cannot generate its CDI spec%s%s: %s", rc->name,
                                  to_stdout ? "" : " in ", to_stdout ? "" : o->cdi_dir,
                                  strerror(-r));
                else {
                        written++;
                        log_info("resource \"%s\": %zu devices in CDI kind \"%s\"", rc->name,
                                 p->n_devs, p->kind);
                }
                cdi_spec_free(&spec);
                res_devlist_free(&found);
                dp_plugin_free(p);
        }
        if (written == 0) {
                log_error("no CDI spec could be written");
                return 1;
        }
        return written + empty == cfg->n_resources ? 0 : 1;
}

int main(int argc, char **argv) {
        static const struct option longopts[] = {
                { "config", required_argument, NULL, OPT_CONFIG },
                { "kubelet-dir", required_argument, NULL, OPT_KUBELET_DIR },
                { "cdi-dir", required_argument, NULL, OPT_CDI_DIR },
                { "host-root", required_argument, NULL, OPT_HOST_ROOT },
                { "user", required_argument, NULL, OPT_USER },
                { "stdout", no_argument, NULL, OPT_STDOUT },
                { "no-sandbox", no_argument, NULL, OPT_NO_SANDBOX },
                { "verbose", no_argument, NULL, OPT_VERBOSE },
                { "metrics-address", required_argument, NULL, OPT_METRICS_ADDRESS },
                { "pod-resources-socket", required_argument, NULL, OPT_PODRES_SOCKET },
                { "json", no_argument, NULL, OPT_JSON },
                { "log-format", required_argument, NULL, OPT_LOG_FORMAT },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct dp_options o = {
                .config_path = DEFAULT_CONFIG,
                .kubelet_dir = DEFAULT_KUBELET_DIR,
                .cdi_dir = DEFAULT_CDI_DIR,
                .host_root = "/",
        };
        struct cfg_config *cfg = NULL;
        bool to_stdout = false, json = false;
        const char *cmd;
        int c, ret;

        if (argc < 2) {
                fputs(usage, stderr);
                return 2;
        }
        cmd = argv[1];
        if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
                fputs(usage, stdout);
                return 0;
        }
        if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
                printf("cdiplug %s (grpc %s, device plugin API v1beta1)\n", CDIPLUG_VERSION,
                       grpc_version_string());
                return 0;
        }
        if (strcmp(cmd, "serve") != 0 && strcmp(cmd, "check") != 0 &&
            strcmp(cmd, "generate") != 0 && strcmp(cmd, "doctor") != 0) {
                fprintf(stderr, "cdiplug: error: unknown command \"%s\" (see cdiplug --help)\n",
                        cmd);
                return 2;
        }
        optind = 2;
        while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
                switch (c) {
                case OPT_CONFIG:
                        o.config_path = optarg;
                        break;
                case OPT_KUBELET_DIR:
                        o.kubelet_dir = optarg;
                        break;
                case OPT_CDI_DIR:
                        o.cdi_dir = optarg;
                        break;
                case OPT_HOST_ROOT:
                        o.host_root = optarg;
                        break;
                case OPT_USER:
                        o.user = optarg;
                        break;
                case OPT_STDOUT:
                        to_stdout = true;
                        break;
                case OPT_NO_SANDBOX:
                        o.no_sandbox = true;
                        break;
                case OPT_VERBOSE:
                        log_set_level(LOG_DEBUG);
                        break;
                case OPT_METRICS_ADDRESS:
                        o.metrics_address = optarg;
                        break;
                case OPT_PODRES_SOCKET:
                        o.pod_resources_socket = optarg;
                        break;
                case OPT_JSON:
                        json = true;
                        break;
                case OPT_LOG_FORMAT:
                        o.log_format = cfg_log_format_parse(optarg);
                        if (o.log_format == CFG_LOG_UNSET) {
                                fprintf(stderr,
                                        "cdiplug: error: --log-format must be \"text\" or \"json\"\n");
                                return 2;
                        }
                        log_set_json(o.log_format == CFG_LOG_JSON);
                        break;
                case 'h':
                        fputs(usage, stdout);
                        return 0;
                default:
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "cdiplug: error: unexpected argument \"%s\"\n", argv[optind]);
                return 2;
        }
        if (!*o.kubelet_dir || !*o.cdi_dir || !*o.host_root) {
                fprintf(stderr,
                        "cdiplug: error: --kubelet-dir, --cdi-dir and --host-root must not be empty\n");
                return 2;
        }
        if (o.metrics_address && *o.metrics_address) {
                struct sockaddr_storage ss;
                unsigned len;
                const char *msg = NULL;
                if (dp_http_parse_address(o.metrics_address, &ss, &len, &msg) < 0) {
                        fprintf(stderr, "cdiplug: error: --metrics-address \"%s\": %s\n",
                                o.metrics_address, msg ? msg : "invalid");
                        return 2;
                }
        }
        if (json && strcmp(cmd, "doctor") != 0) {
                fprintf(stderr, "cdiplug: error: --json is for doctor only\n");
                return 2;
        }
        if (strcmp(cmd, "doctor") == 0)
                /* doctor explains an invalid config instead of stopping at it. */
                return doc_run(&(struct doc_options){ .config_path = o.config_path,
                                                      .host_root = o.host_root,
                                                      .kubelet_dir = o.kubelet_dir,
                                                      .cdi_dir = o.cdi_dir,
                                                      .metrics_address = o.metrics_address,
                                                      .json = json });
        if (load_config(&o, &cfg) < 0)
                return 2;
        if (o.log_format == CFG_LOG_UNSET)
                log_set_json(cfg->log_format == CFG_LOG_JSON);
        ret = dp_names_prepare(cfg, o.kubelet_dir, strcmp(cmd, "generate") != 0);
        if (ret < 0) {
                if (ret != -EINVAL)
                        log_error("%s: %s", o.config_path, strerror(-ret));
                cfg_free(cfg);
                return ret == -EINVAL ? 2 : 1;
        }
        if (strcmp(cmd, "check") == 0) {
                check_warnings(cfg);
                dp_check_devices(o.host_root, cfg);
                printf("%s: valid, %zu resources\n", o.config_path, cfg->n_resources);
                ret = 0;
        } else if (strcmp(cmd, "generate") == 0)
                ret = generate(&o, cfg, to_stdout);
        else {
                log_info("cdiplug %s starting: %zu resources, kubelet dir %s, CDI dir %s",
                         CDIPLUG_VERSION, cfg->n_resources, o.kubelet_dir, o.cdi_dir);
                if (cfg->n_resources == 0)
                        log_warn(
                                "%s configures no resources: serving nothing; add resources to it "
                                "(see cdiplug(8) and the example config.json in cdiplug's doc dir)",
                                o.config_path);
                ret = dp_daemon_run(&o, TAKE_PTR(cfg));
        }
        cfg_free(cfg);
        return ret;
}
