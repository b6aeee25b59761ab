/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by node.c (server, sockets, unary calls) and node_health.c (the
 * NodeWatchResources streams). */
#pragma once

#include <grpc/grpc.h>
#include <stdbool.h>
#include <stdint.h>

#include "dra_node.h"

struct dra_call;

struct dra_node {
        char *driver;
        char *registry_dir;  /* <root>/plugins_registry */
        char *registry_name; /* <driver>-reg.sock */
        char *registry_path;
        char *plugin_dir; /* <root>/plugins/<driver> */
        char *endpoint;   /* <plugin_dir>/dra.sock: what GetInfo answers */

        grpc_completion_queue *cq;
        grpc_server *server;
        bool up;       /* offering call slots */
        bool stopping; /* shutdown asked, its tag not back yet */
        struct dp_tag shutdown_tag;
        int reg_fd;    /* listening on registry_path, or -1 */
        int dra_fd;    /* listening on endpoint, or -1 */
        unsigned live; /* call slots and calls, and the server until its shutdown tag */
        bool accepted_logged;

        /* node_health.c's */
        struct dra_call *streams;
        uint8_t *health_buf; /* the packed list, NodeWatchResourcesResponse */
        size_t health_len;
        uint8_t *health_bare; /* the same without the times, to tell a change */
        size_t health_bare_len;
        uint64_t health_gen; /* bumped when the list changes */
};

/* A call from its slot to its end (node.c owns its life). */
enum dra_phase { DRA_NEW, DRA_RECV, DRA_FINISH };
struct dra_call {
        struct dp_tag tag;       /* unary phases and a stream's first read */
        struct dp_tag send_tag;  /* streams: the send in flight */
        struct dp_tag close_tag; /* streams: the peer went away */
        struct dra_node *n;
        enum dra_phase phase;
        grpc_call *call;
        grpc_call_details details;
        grpc_metadata_array md;
        grpc_byte_buffer *recv;
        grpc_byte_buffer *send;
        grpc_slice status_details;
        int cancelled;
        /* streams */
        unsigned refs;
        bool sending, closed, md_sent, ending, status_in_flight;
        uint64_t sent_gen;
        struct dra_call *next;
};

void dra_call_free(struct dra_call *c);

/* node_health.c */
void dra_health_open(struct dra_call *c);
void dra_health_end_all(struct dra_node *n);
bool dra_health_ending(const struct dra_node *n);
void dra_health_free(struct dra_node *n);
