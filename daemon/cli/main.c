/* SPDX-License-Identifier: Apache-2.0 */
/* cdiplug: the options, the command table, main() a dispatch. Exit codes
 * (cli-internal.h): 0 success, 1 runtime failure,
 * 2 usage or configuration error (nothing written). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grpc/grpc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cdi.h"
#include "config.h"
#include "serve.h"
#include "doctor.h"
#include "plugin.h"
#include "resources.h"
#include "sandbox.h"
#include "log.h"
#include "metrics.h"

#include "cli-internal.h"

#define DEFAULT_CONFIG "/etc/cdiplug/config.json"
#define DEFAULT_KUBELET_ROOT "/var/lib/kubelet"
/* The kubelet serves the device plugin API at this fixed path whatever its
 * --root-dir (KubeletSocket in k8s.io/kubelet's deviceplugin/v1beta1):
 * only plugins_registry, plugins and pod-resources follow the root. */
#define DEFAULT_KUBELET_DIR "/var/lib/kubelet/device-plugins"
/* deploy/base's image: the one the Containerfile builds. */
#define DEFAULT_IMAGE "cdiplug:" CDIPLUG_VERSION
#define DEFAULT_CDI_DIR "/etc/cdi"

/* Every option, once: its name, its argument and what it does. Which
 * commands take it is the command table's business. */
enum opt_id {
        OPT_CONFIG,
        OPT_KUBELET_DIR,
        OPT_KUBELET_ROOT,
        OPT_KUBECONFIG,
        OPT_NODE_NAME,
        OPT_NODE_LABELS,
        OPT_NFD_DIR,
        OPT_NFD,
        OPT_CDI_DIR,
        OPT_HOST_ROOT,
        OPT_USER,
        OPT_METRICS_ADDRESS,
        OPT_PODRES_SOCKET,
        OPT_LOG_FORMAT,
        OPT_STDOUT,
        OPT_JSON,
        OPT_NAMESPACE,
        OPT_IMAGE,
        OPT_NO_SANDBOX,
        OPT_VERBOSE,
        N_OPTS
};

#define OPT(id) (1u << (id))

struct cli_option {
        const char *name;
        const char *arg; /* placeholder for its value, NULL for a flag */
        const char *help;
};

static const struct cli_option options[N_OPTS] = {
        [OPT_CONFIG] = { "config", "FILE", "configuration (default " DEFAULT_CONFIG ")" },
        [OPT_KUBELET_DIR] = { "kubelet-dir", "DIR",
                              "kubelet device-plugin dir (default\n" DEFAULT_KUBELET_DIR
                              ",\nwhatever --kubelet-root)" },
        [OPT_KUBELET_ROOT] = { "kubelet-root", "DIR",
                               "the kubelet's root dir (its root-dir flag), for DRA's\n"
                               "plugins_registry and plugins (default\n" DEFAULT_KUBELET_ROOT ")" },
        [OPT_KUBECONFIG] = { "kubeconfig", "FILE",
                             "API server credentials for DRA (default: the\n"
                             "pod's service account)" },
        [OPT_NODE_NAME] = { "node-name", "NAME",
                            "this node's name, for DRA and the resources'\n"
                            "\"nodes\" (default: $NODE_NAME)" },
        [OPT_NODE_LABELS] = { "node-labels", "KEY=VALUE,...",
                              "the node's labels, for the resources' \"nodes\"\n"
                              "(serve reads them from the API server)" },
        [OPT_NFD_DIR] = { "nfd-features-dir", "DIR",
                          "keep a Node Feature Discovery feature file, DIR/cdiplug\n"
                          "(default: the config's nfd.features_dir, else none)" },
        [OPT_NFD] = { "nfd", NULL, "mount NFD's features.d and keep the feature file there" },
        [OPT_CDI_DIR] = { "cdi-dir", "DIR", "where CDI specs go (default " DEFAULT_CDI_DIR ")" },
        [OPT_HOST_ROOT] = { "host-root", "DIR", "read /dev and /sys under DIR (default /)" },
        [OPT_USER] = { "user", "NAME|UID[:GID]",
                       "serve as this identity (default: uid 0, no capabilities);\n"
                       "check: resolve it as serve will" },
        [OPT_METRICS_ADDRESS] = { "metrics-address", "HOST:PORT",
                                  "serve /metrics, /healthz, /readyz there (\"\": off;\n"
                                  "default: the config's metrics.address, else off;\n"
                                  "doctor: ask the daemon's /readyz there)" },
        [OPT_PODRES_SOCKET] = { "pod-resources-socket", "PATH",
                                "kubelet PodResources socket, for pod labels and\n"
                                "to tell when a spec no resource owns may go (\"\": off)\n"
                                "(default " DP_DEFAULT_PODRES_SOCKET ")" },
        [OPT_LOG_FORMAT] = { "log-format", "text|json",
                             "log lines as text (default) or JSON objects" },
        [OPT_STDOUT] = { "stdout", NULL, "print the specs instead of writing them" },
        [OPT_JSON] = { "json", NULL, "print the report as JSON" },
        [OPT_NAMESPACE] = { "namespace", "NS", "the manifests' namespace (default cdiplug)" },
        [OPT_IMAGE] = { "image", "IMAGE", "the DaemonSet's image (default " DEFAULT_IMAGE ")" },
        [OPT_NO_SANDBOX] = { "no-sandbox", NULL, "serve without the lock-down (debugging only)" },
        [OPT_VERBOSE] = { "verbose", NULL, "log debug messages" },
};

struct cli_command {
        const char *name;
        const char *summary;
        unsigned opts; /* OPT() bits of the options it takes, besides --help */
        int (*run)(const struct dp_options *o);
};

static const struct cli_command commands[] = {
        { "serve", "run the device plugin daemon",
          OPT(OPT_CONFIG) | OPT(OPT_KUBELET_DIR) | OPT(OPT_KUBELET_ROOT) | OPT(OPT_KUBECONFIG) |
                  OPT(OPT_NODE_NAME) | OPT(OPT_CDI_DIR) | OPT(OPT_HOST_ROOT) | OPT(OPT_USER) |
                  OPT(OPT_METRICS_ADDRESS) | OPT(OPT_PODRES_SOCKET) | OPT(OPT_LOG_FORMAT) |
                  OPT(OPT_NFD_DIR) | OPT(OPT_NO_SANDBOX) | OPT(OPT_VERBOSE),
          cli_serve },
        { "check", "validate the configuration (and the devices it finds) and exit",
          OPT(OPT_CONFIG) | OPT(OPT_KUBELET_DIR) | OPT(OPT_KUBELET_ROOT) | OPT(OPT_HOST_ROOT) |
                  OPT(OPT_USER) | OPT(OPT_NODE_NAME) | OPT(OPT_NODE_LABELS) | OPT(OPT_LOG_FORMAT) |
                  OPT(OPT_VERBOSE),
          cli_check },
        { "generate", "discover devices once, write the CDI specs and exit",
          OPT(OPT_CONFIG) | OPT(OPT_CDI_DIR) | OPT(OPT_HOST_ROOT) | OPT(OPT_STDOUT) |
                  OPT(OPT_NODE_NAME) | OPT(OPT_NODE_LABELS) | OPT(OPT_LOG_FORMAT) |
                  OPT(OPT_VERBOSE),
          cli_generate },
        { "doctor", "check this node and explain what stands in the way (read-only)",
          OPT(OPT_CONFIG) | OPT(OPT_KUBELET_DIR) | OPT(OPT_KUBELET_ROOT) | OPT(OPT_KUBECONFIG) |
                  OPT(OPT_CDI_DIR) | OPT(OPT_HOST_ROOT) | OPT(OPT_METRICS_ADDRESS) | OPT(OPT_JSON) |
                  OPT(OPT_NODE_NAME) | OPT(OPT_NODE_LABELS) | OPT(OPT_VERBOSE),
          cli_doctor },
        { "manifests", "print the Kubernetes objects that serve the DRA resources",
          OPT(OPT_CONFIG) | OPT(OPT_KUBELET_ROOT) | OPT(OPT_NAMESPACE) | OPT(OPT_IMAGE) |
                  OPT(OPT_NFD) | OPT(OPT_VERBOSE),
          cli_manifests },
        { "version", "print the version", 0, cli_version },
};

static const struct cli_command *find_command(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (strcmp(commands[i].name, name) == 0)
                        return &commands[i];
        return NULL;
}

/* "serve, check and doctor": the commands that take an option. */
static size_t print_commands_taking(FILE *f, enum opt_id id) {
        size_t n = 0, k = 0;

        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                n += !!(commands[i].opts & OPT(id));
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (commands[i].opts & OPT(id))
                        fprintf(f, "%s%s",
                                k++ == 0 ? ""
                                : k == n ? " and "
                                         : ", ",
                                commands[i].name);
        return n;
}

#define HELP_COLUMN 23

/* An option and its help, the help's lines in one column; with_commands
 * adds which commands take it (for the overall usage). */
static void print_option(FILE *f, enum opt_id id, bool with_commands) {
        const struct cli_option *opt = &options[id];
        int w = fprintf(f, "  --%s%s%s", opt->name, opt->arg ? " " : "", opt->arg ? opt->arg : "");

        if (w >= HELP_COLUMN - 1) {
                fputc('\n', f);
                w = 0;
        }
        for (const char *line = opt->help; *line;) {
                size_t len = strcspn(line, "\n");
                fprintf(f, "%*s%.*s\n", HELP_COLUMN - w, "", (int)len, line);
                w = 0;
                line += len + (line[len] == '\n');
        }
        if (with_commands) {
                fprintf(f, "%*s(", HELP_COLUMN, "");
                print_commands_taking(f, id);
                fputs(")\n", f);
        }
}

/* "Usage: cdiplug NAME [--opt ARG]...", wrapped under the command name. */
static void print_synopsis(FILE *f, const struct cli_command *cmd) {
        int indent = fprintf(f, "Usage: cdiplug %s", cmd->name), col = indent;

        for (size_t i = 0; i < N_OPTS; i++) {
                if (!(cmd->opts & OPT(i)))
                        continue;
                int len = (int)strlen(options[i].name) + 5 +
                          (options[i].arg ? (int)strlen(options[i].arg) + 1 : 0);
                if (col + len > 79) {
                        fprintf(f, "\n%*s", indent, "");
                        col = indent;
                }
                col += fprintf(f, " [--%s%s%s]", options[i].name, options[i].arg ? " " : "",
                               options[i].arg ? options[i].arg : "");
        }
        fputc('\n', f);
}

static void command_help(FILE *f, const struct cli_command *cmd) {
        print_synopsis(f, cmd);
        fprintf(f, "\n%c%s.\n\nOptions:\n", toupper((unsigned char)cmd->summary[0]),
                cmd->summary + 1);
        for (size_t i = 0; i < N_OPTS; i++)
                if (cmd->opts & OPT(i))
                        print_option(f, (enum opt_id)i, false);
        fputs("  -h, --help           show this help\n", f);
}

static void usage(FILE *f) {
        fputs("Usage: cdiplug COMMAND [OPTIONS]\n"
              "\n"
              "Expose host devices to Kubernetes pods through the kubelet's device\n"
              "plugin API, with CDI specs for the container runtime.\n"
              "\n"
              "Commands:\n",
              f);
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
        fputs("\nOptions:\n", f);
        for (size_t i = 0; i < N_OPTS; i++)
                print_option(f, (enum opt_id)i, true);
        fputs("  -h, --help           show this help\n"
              "\n"
              "Each command takes the options its synopsis lists: cdiplug COMMAND --help.\n",
              f);
}

/* Store one option's value; 0, or the exit status for a bad value. */
static int set_option(struct dp_options *o, enum opt_id id, const char *arg) {
        switch (id) {
        case OPT_CONFIG:
                o->config_path = arg;
                break;
        case OPT_KUBELET_DIR:
                o->kubelet_dir = arg;
                break;
        case OPT_KUBELET_ROOT:
                o->kubelet_root = arg;
                break;
        case OPT_KUBECONFIG:
                o->kubeconfig = arg;
                break;
        case OPT_NODE_NAME:
                o->node_name = arg;
                break;
        case OPT_NODE_LABELS:
                o->node_labels = arg;
                break;
        case OPT_NFD_DIR:
                o->nfd_features_dir = arg;
                break;
        case OPT_NFD:
                o->nfd = true;
                break;
        case OPT_CDI_DIR:
                o->cdi_dir = arg;
                break;
        case OPT_HOST_ROOT:
                o->host_root = arg;
                break;
        case OPT_USER:
                o->user = arg;
                break;
        case OPT_METRICS_ADDRESS:
                o->metrics_address = arg;
                break;
        case OPT_PODRES_SOCKET:
                o->pod_resources_socket = arg;
                break;
        case OPT_LOG_FORMAT:
                o->log_format = cfg_log_format_parse(arg);
                if (o->log_format == CFG_LOG_UNSET) {
                        fprintf(stderr,
                                "cdiplug: error: --log-format must be \"text\" or \"json\"\n");
                        return CLI_EXIT_USAGE;
                }
                log_set_json(o->log_format == CFG_LOG_JSON);
                break;
        case OPT_STDOUT:
                o->to_stdout = true;
                break;
        case OPT_JSON:
                o->json = true;
                break;
        case OPT_NAMESPACE:
                o->namespace_name = arg;
                break;
        case OPT_IMAGE:
                o->image = arg;
                break;
        case OPT_NO_SANDBOX:
                o->no_sandbox = true;
                break;
        case OPT_VERBOSE:
                log_set_level(LOG_DEBUG);
                break;
        case N_OPTS:
                break;
        }
        return 0;
}

/* getopt's own messages are off (opterr): every mistake is said one way,
 * with the command whose help lists what it takes. 0 when parsed,
 * HELP_PRINTED, else the exit status 2. */
#define HELP_PRINTED (-1)
static int parse_options(const struct cli_command *cmd, int argc, char **argv,
                         struct dp_options *o) {
        struct option longopts[N_OPTS + 2];
        int c;

        for (size_t i = 0; i < N_OPTS; i++)
                longopts[i] = (struct option){ options[i].name,
                                               options[i].arg ? required_argument : no_argument,
                                               NULL, (int)i + 1 };
        longopts[N_OPTS] = (struct option){ "help", no_argument, NULL, 'h' };
        longopts[N_OPTS + 1] = (struct option){ 0 };
        opterr = 0;
        optind = 2;
        while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
                const char *given = argv[optind - 1];
                if (c == 'h') {
                        command_help(stdout, cmd);
                        return HELP_PRINTED;
                }
                if (c == ':') {
                        fprintf(stderr, "cdiplug: error: %s needs a value; see cdiplug %s --help\n",
                                given, cmd->name);
                        return CLI_EXIT_USAGE;
                }
                if (c == '?' && ((optopt >= 1 && optopt <= N_OPTS) || optopt == 'h') &&
                    strncmp(given, "--", 2) == 0) {
                        /* "--stdout=yes": a flag given a value. */
                        fprintf(stderr,
                                "cdiplug: error: \"%s\": the option takes no value; see cdiplug "
                                "%s --help\n",
                                given, cmd->name);
                        return CLI_EXIT_USAGE;
                }
                if (c == '?') {
                        if (optopt > 0)
                                fprintf(stderr, "cdiplug: error: unknown option \"-%c\"", optopt);
                        else
                                fprintf(stderr, "cdiplug: error: unknown option \"%s\"", given);
                        fprintf(stderr, "; see cdiplug %s --help\n", cmd->name);
                        return CLI_EXIT_USAGE;
                }
                enum opt_id id = (enum opt_id)(c - 1);
                if (!(cmd->opts & OPT(id))) {
                        fprintf(stderr, "cdiplug: error: --%s is for ", options[id].name);
                        size_t n = print_commands_taking(stderr, id);
                        fprintf(stderr, "%s, not %s; see cdiplug %s --help\n",
                                n == 1 ? " only" : "", cmd->name, cmd->name);
                        return CLI_EXIT_USAGE;
                }
                int r = set_option(o, id, optarg);
                if (r != 0)
                        return r;
        }
        if (optind < argc) {
                fprintf(stderr,
                        "cdiplug: error: unexpected argument \"%s\"; see cdiplug %s --help\n",
                        argv[optind], cmd->name);
                return CLI_EXIT_USAGE;
        }
        return 0;
}

/* Every command reads devices (and doctor the runtime's files) under the
 * host root: a missing one is a usage error, said as such, rather than
 * "No such file or directory" for each resource or a "valid" config. */
static int check_host_root(const char *host_root) {
        _cleanup_close_ int fd = open(host_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd >= 0)
                return 0;
        fprintf(stderr, "cdiplug: error: --host-root %s: %s\n", host_root,
                errno == ENOENT    ? "no such directory"
                : errno == ENOTDIR ? "not a directory"
                : errno == EACCES  ? "cannot be read (permission denied)"
                                   : strerror(errno));
        return CLI_EXIT_USAGE;
}

/* What every command checks the same way once its options are read. */
static int check_options(const struct cli_command *cmd, const struct dp_options *o) {
        if (!*o->config_path || !*o->kubelet_dir || !*o->kubelet_root || !*o->cdi_dir ||
            !*o->host_root || (o->kubeconfig && !*o->kubeconfig) ||
            (o->nfd_features_dir && *o->nfd_features_dir != '/')) {
                if (o->nfd_features_dir && *o->nfd_features_dir != '/') {
                        fprintf(stderr, "cdiplug: error: --nfd-features-dir must be an absolute "
                                        "path\n");
                        return CLI_EXIT_USAGE;
                }
                fprintf(stderr, "cdiplug: error: --config, --kubelet-dir, --kubelet-root, "
                                "--kubeconfig, --cdi-dir and --host-root must not be empty\n");
                return CLI_EXIT_USAGE;
        }
        /* The name goes into the pool names and the API's field selectors:
         * a Node's name is a DNS subdomain (ValidateNodeName). */
        if (o->node_name && cfg_node_name_problem(o->node_name)) {
                fprintf(stderr, "cdiplug: error: %s \"%s\": %s\n",
                        o->node_name_from_env ? "NODE_NAME" : "--node-name", o->node_name,
                        cfg_node_name_problem(o->node_name));
                return CLI_EXIT_USAGE;
        }
        if (o->metrics_address && *o->metrics_address) {
                struct sockaddr_storage ss;
                unsigned len;
                const char *msg = NULL;
                if (dp_http_parse_address(o->metrics_address, &ss, &len, &msg) < 0) {
                        fprintf(stderr, "cdiplug: error: --metrics-address \"%s\": %s\n",
                                o->metrics_address, msg ? msg : "invalid");
                        return CLI_EXIT_USAGE;
                }
        }
        if (cmd->opts & OPT(OPT_HOST_ROOT))
                return check_host_root(o->host_root);
        return 0;
}

/* Which instance serve is: the downward API's way in is env POD_UID from
 * metadata.uid, as upstream's kubelet plugin helper takes it. Unset or
 * empty (outside a pod: a service manager runs one instance at a time)
 * keeps the single-instance socket names. serve names its sockets by it,
 * check checks those names fit, and doctor, run in the pod (kubectl exec),
 * looks for that pod's. */
static int instance_from_env(const struct cli_command *cmd, struct dp_options *o,
                             char tag[static 9]) {
        const char *env = getenv("POD_UID");

        if ((strcmp(cmd->name, "serve") != 0 && strcmp(cmd->name, "doctor") != 0 &&
             strcmp(cmd->name, "check") != 0) ||
            !env || !*env)
                return 0;
        if (cfg_pod_uid_problem(env)) {
                /* What the environment holds may be anything: shown escaped. */
                char shown[CFG_POD_UID_MAX * 4 + 8];

                base_quote(env, CFG_POD_UID_MAX + 1, shown, sizeof(shown));
                fprintf(stderr, "cdiplug: error: POD_UID \"%s\": %s\n", shown,
                        cfg_pod_uid_problem(env));
                return CLI_EXIT_USAGE;
        }
        cfg_instance_tag(env, tag);
        o->pod_uid = env;
        o->instance = tag;
        return 0;
}

int main(int argc, char **argv) {
        struct dp_options o = {
                .config_path = DEFAULT_CONFIG,
                .kubelet_root = DEFAULT_KUBELET_ROOT,
                .cdi_dir = DEFAULT_CDI_DIR,
                .host_root = "/",
                .namespace_name = "cdiplug",
                .image = DEFAULT_IMAGE,
        };
        const struct cli_command *cmd;
        char instance[9];
        int r;

        if (argc < 2) {
                usage(stderr);
                return CLI_EXIT_USAGE;
        }
        if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
            strcmp(argv[1], "help") == 0) {
                /* "cdiplug help serve" is "cdiplug serve --help". */
                if (argc > 2 && strcmp(argv[1], "help") == 0) {
                        cmd = find_command(argv[2]);
                        if (!cmd) {
                                fprintf(stderr,
                                        "cdiplug: error: unknown command \"%s\" (see cdiplug --help)\n",
                                        argv[2]);
                                return CLI_EXIT_USAGE;
                        }
                        command_help(stdout, cmd);
                        return 0;
                }
                usage(stdout);
                return 0;
        }
        cmd = find_command(strcmp(argv[1], "--version") == 0 ? "version" : argv[1]);
        if (!cmd) {
                fprintf(stderr, "cdiplug: error: unknown command \"%s\" (see cdiplug --help)\n",
                        argv[1]);
                return CLI_EXIT_USAGE;
        }
        r = parse_options(cmd, argc, argv, &o);
        if (r != 0)
                return r == HELP_PRINTED ? CLI_EXIT_OK : r;
        if (!o.kubelet_dir)
                o.kubelet_dir = DEFAULT_KUBELET_DIR;
        if (!o.node_name && (cmd->opts & OPT(OPT_NODE_NAME))) {
                /* The downward API's way in: env NODE_NAME from
                 * spec.nodeName. Unset or empty is no name. */
                const char *env = getenv("NODE_NAME");
                if (env && *env) {
                        o.node_name = env;
                        o.node_name_from_env = true;
                }
        }
        r = instance_from_env(cmd, &o, instance);
        if (r != 0)
                return r;
        r = check_options(cmd, &o);
        if (r != 0)
                return r;
        return cmd->run(&o);
}
