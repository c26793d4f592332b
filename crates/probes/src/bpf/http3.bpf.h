/* SPDX-License-Identifier: (MIT OR GPL-2.0-only) */
/*
 * HTTP/3 requests served, counted where the server answers them: requests inside QUIC travel in
 * encrypted datagrams the socket probes cannot read, so a uprobe on libnghttp3's
 * nghttp3_conn_submit_response (one call per request stream answered; ngtcp2's servers call it
 * once per request) counts them. Never detached while the other probes pause, so the count is
 * exact over every window: one trap per response (docs/tls.md, "QUIC").
 */
#ifndef HTTP3_BPF_H
#define HTTP3_BPF_H

#include "tree.bpf.h"

/* Responses the tracked tree submitted since the probes attached; read by the loader. */
__u64 http3_responses;

SEC("uprobe")
int http3_response(struct pt_regs *ctx)
{
	if (current_tracked())
		__sync_fetch_and_add(&http3_responses, 1);
	return 0;
}

#endif
