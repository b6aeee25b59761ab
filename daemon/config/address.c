/* SPDX-License-Identifier: Apache-2.0 */
/* "HOST:PORT" and "[V6]:PORT" addresses, numeric hosts only: the metrics
 * endpoint's address is parsed here because the config, the command line
 * and doctor all check it, and none of them should need the endpoint. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "config.h"
#include "log.h"

int dp_http_parse_address(const char *address, void *ret_sockaddr, unsigned *ret_len,
                          const char **err_msg) {
        struct sockaddr_storage ss = { 0 };
        _cleanup_free_ char *host = NULL;
        const char *colon, *port_s;
        char *end;
        unsigned long port;

        if (address[0] == '[') {
                const char *close = strchr(address, ']');
                if (!close || close[1] != ':') {
                        *err_msg = "an IPv6 address must be written [ADDRESS]:PORT";
                        return -EINVAL;
                }
                host = strndup(address + 1, (size_t)(close - address - 1));
                port_s = close + 2;
        } else {
                colon = strrchr(address, ':');
                if (!colon || strchr(address, ':') != colon) {
                        *err_msg = "must be HOST:PORT with a numeric host, e.g. 127.0.0.1:9633";
                        return -EINVAL;
                }
                host = strndup(address, (size_t)(colon - address));
                port_s = colon + 1;
        }
        if (!host)
                return -ENOMEM;
        errno = 0;
        port = strtoul(port_s, &end, 10);
        if (!*port_s || *end || errno || port == 0 || port > 65535 || *port_s == '+' ||
            *port_s == '-') {
                *err_msg = "the port must be a number from 1 to 65535";
                return -EINVAL;
        }
        if (address[0] == '[') {
                struct sockaddr_in6 *sa = (struct sockaddr_in6 *)&ss;
                sa->sin6_family = AF_INET6;
                sa->sin6_port = htons((uint16_t)port);
                if (inet_pton(AF_INET6, host, &sa->sin6_addr) != 1) {
                        *err_msg = "not a numeric IPv6 address";
                        return -EINVAL;
                }
                *ret_len = sizeof(*sa);
        } else {
                struct sockaddr_in *sa = (struct sockaddr_in *)&ss;
                sa->sin_family = AF_INET;
                sa->sin_port = htons((uint16_t)port);
                /* ":PORT" listens on every IPv4 address. */
                if (*host && inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
                        *err_msg = "not a numeric IPv4 address (host names are not resolved)";
                        return -EINVAL;
                }
                *ret_len = sizeof(*sa);
        }
        memcpy(ret_sockaddr, &ss, *ret_len);
        return 0;
}
