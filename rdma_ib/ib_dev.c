/* ib_dev.c - device, port and GID choice; RC QP creation and wiring. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ib_dev.h"
#include "core/log.h"
#include "core/num.h"

const char *ib_mtu_str(enum ibv_mtu mtu)
{
	switch (mtu) {
	case IBV_MTU_256: return "256";
	case IBV_MTU_512: return "512";
	case IBV_MTU_1024: return "1024";
	case IBV_MTU_2048: return "2048";
	case IBV_MTU_4096: return "4096";
	}
	return "?";
}

int ib_gid_is_v4mapped(const union ibv_gid *g)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					 0xff, 0xff };

	return !memcmp(g->raw, pfx, sizeof(pfx));
}

const char *ib_gid_str(const union ibv_gid *g, char *buf, size_t len)
{
	if (!inet_ntop(AF_INET6, g->raw, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

/* RoCE v2 according to sysfs (kernels/libraries without gid_ex). */
static int ib_gid_sysfs_v2(const struct ib_dev *d, int idx)
{
	char path[256], buf[32] = "";
	FILE *f;

	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/%u/gid_attrs/types/%d",
		 d->name, d->port, idx);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return strstr(buf, "v2") != NULL;
}

/* Best RoCE GID: v2 and IPv4-mapped, else v2, else any non-zero. */
static int ib_gid_pick(struct ib_dev *d, int tbl_len)
{
	int idx, best = -1, score = 0;

	for (idx = 0; idx < tbl_len; idx++) {
		struct ibv_gid_entry e;
		union ibv_gid g;
		int v2, s;

		if (ibv_query_gid(d->ctx, d->port, idx, &g))
			continue;
		if (!g.global.interface_id && !g.global.subnet_prefix)
			continue;
		if (!ibv_query_gid_ex(d->ctx, d->port, (uint32_t)idx, &e, 0))
			v2 = e.gid_type == IBV_GID_TYPE_ROCE_V2;
		else
			v2 = ib_gid_sysfs_v2(d, idx);
		s = 1 + 2 * v2 + ib_gid_is_v4mapped(&g);
		if (s > score) {
			score = s;
			best = idx;
		}
	}
	return best;
}

/* Say why this device cannot serve (kept for the error of a peer on
 * another host, see ib_open), at debug level here. */
static void ib_dev_why(struct ib_dev *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void ib_dev_why(struct ib_dev *d, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->why, sizeof(d->why), fmt, ap);
	va_end(ap);
	rdmach_debug("ib: %s", d->why);
}

static int ib_port_setup(struct ib_dev *d, const struct ibv_port_attr *pa,
			 int tbl_len, const char *gid)
{
	d->active_mtu = pa->active_mtu;
	d->lid = pa->lid;
	d->is_roce = pa->link_layer == IBV_LINK_LAYER_ETHERNET;
	d->gid_index = -1;
	if (strcmp(gid, "auto")) {
		uint64_t v;

		if (rdmach_num(gid, 10, INT32_MAX, &v, NULL) ||
		    v >= (uint64_t)tbl_len) {
			rdmach_err("RDMACH_IB_GID_INDEX=%s: not \"auto\" or a "
				   "GID index 0..%d of %s port %u", gid,
				   tbl_len - 1, d->name, d->port);
			return -EINVAL;
		}
		d->gid_index = (int)v;
	} else if (d->is_roce) {
		d->gid_index = ib_gid_pick(d, tbl_len);
		if (d->gid_index < 0) {
			ib_dev_why(d, "%s port %u is RoCE but has no GID (no "
				   "IP address on its interface?)", d->name,
				   d->port);
			return -ENODEV;
		}
	}
	if (d->gid_index >= 0 &&
	    ibv_query_gid(d->ctx, d->port, d->gid_index, &d->gid)) {
		rdmach_err("ib: cannot read GID %d of %s port %u",
			   d->gid_index, d->name, d->port);
		return -ENODEV;
	}
	return 0;
}

/* First active port of an open device matching the wanted port. */
static int ib_dev_try(struct ib_dev *d, unsigned int want_port,
		      const char *gid)
{
	struct ibv_device_attr da;
	unsigned int p;

	if (ibv_query_device(d->ctx, &da)) {
		ib_dev_why(d, "ibv_query_device(%s): %s", d->name,
			   strerror(errno));
		return -ENODEV;
	}
	d->max_qp_rd_atom = da.max_qp_rd_atom;
	d->max_cqe = da.max_cqe;
	d->max_sge = da.max_sge;
	d->max_qp = da.max_qp;
	for (p = 1; p <= da.phys_port_cnt; p++) {
		struct ibv_port_attr pa;

		if (want_port && p != want_port)
			continue;
		if (ibv_query_port(d->ctx, (uint8_t)p, &pa))
			continue;
		if (pa.state != IBV_PORT_ACTIVE) {
			ib_dev_why(d, "%s port %u is not active (state %s)",
				   d->name, p, ibv_port_state_str(pa.state));
			continue;
		}
		d->port = (uint8_t)p;
		d->max_msg_sz = pa.max_msg_sz;
		return ib_port_setup(d, &pa, pa.gid_tbl_len, gid);
	}
	return -ENODEV;
}

int ib_dev_open(struct ib_dev *d, const char *want, unsigned int port,
		const char *gid)
{
	struct ibv_device **list;
	int i, n = 0, ret = -ENODEV, fl;

	memset(d, 0, sizeof(*d));
	list = ibv_get_device_list(&n);
	if (!list || !n) {
		ib_dev_why(d, "no RDMA device (ibv_get_device_list found %d)",
			   n);
		if (list)
			ibv_free_device_list(list);
		return -ENODEV;
	}
	for (i = 0; i < n; i++) {
		const char *name = ibv_get_device_name(list[i]);

		if (*want && strcmp(want, name))
			continue;
		d->ctx = ibv_open_device(list[i]);
		if (!d->ctx) {
			ib_dev_why(d, "ibv_open_device(%s): %s", name,
				   strerror(errno));
			continue;
		}
		snprintf(d->name, sizeof(d->name), "%s", name);
		ret = ib_dev_try(d, port, gid);
		if (!ret)
			break;
		ibv_close_device(d->ctx);
		d->ctx = NULL;
		if (ret == -EINVAL)
			break;
	}
	ibv_free_device_list(list);
	if (ret) {
		if (*want || port) {
			ib_dev_why(d, "no active port matches RDMACH_IB_DEVICE="
				   "%s RDMACH_IB_PORT=%u (see ibv_devinfo)",
				   want, port);
			rdmach_err("ib: %s", d->why);
		} else if (!d->why[0]) {
			ib_dev_why(d, "no RDMA device with an active port");
		}
		return ret == -EINVAL ? -EINVAL : -ENODEV;
	}
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd) {
		ib_dev_why(d, "ibv_alloc_pd on %s failed", d->name);
		rdmach_err("ib: %s", d->why);
		ibv_close_device(d->ctx);
		d->ctx = NULL;
		return -ENODEV;
	}
	/* ib_dev_async reads it when due, never waiting */
	fl = fcntl(d->ctx->async_fd, F_GETFL);
	d->async_ok = fl >= 0 &&
		      !fcntl(d->ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	if (!d->async_ok)
		rdmach_warn("ib: %s: async events not read: fcntl: %s",
			    d->name, strerror(errno));
	rdmach_info("ib: %s port %u, %s, lid %u, gid index %d, active MTU %s",
		    d->name, d->port, d->is_roce ? "RoCE" : "InfiniBand",
		    d->lid, d->gid_index, ib_mtu_str(d->active_mtu));
	return 0;
}

int ib_dev_async(struct ib_dev *d, const struct ibv_cq *cq, char *why,
		 size_t len)
{
	struct ibv_async_event ev;
	int fatal = 0;

	while (d->async_ok && !fatal && !ibv_get_async_event(d->ctx, &ev)) {
		enum ibv_event_type type = ev.event_type;
		int ours = type == IBV_EVENT_CQ_ERR && ev.element.cq == cq;

		ibv_ack_async_event(&ev);
		switch (type) {
		case IBV_EVENT_CQ_ERR:	/* the tuning's own CQ: not ours */
			if (!ours)
				break;
			snprintf(why, len, "completion queue overrun on %s: "
				 "completions were lost", d->name);
			fatal = 1;
			break;
		case IBV_EVENT_DEVICE_FATAL:
			snprintf(why, len, "device %s failed (%s)", d->name,
				 ibv_event_type_str(type));
			fatal = 1;
			break;
		case IBV_EVENT_PORT_ERR:
			rdmach_warn("ib: %s port %u went down: connections "
				    "through it fail at their retry limit",
				    d->name, d->port);
			break;
		default:	/* a QP's errors come as its completions */
			rdmach_debug("ib: %s: async event %s", d->name,
				     ibv_event_type_str(type));
		}
	}
	return fatal;
}

void ib_dev_close(struct ib_dev *d)
{
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	if (d->ctx)
		ibv_close_device(d->ctx);
	d->pd = NULL;
	d->ctx = NULL;
}

struct ibv_qp *ib_qp_create(struct ib_dev *d, struct ibv_cq *cq,
			    struct ibv_srq *srq, unsigned int sq_depth,
			    unsigned int inline_want, unsigned int *inline_max)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct ibv_qp *qp = NULL;

	/* inline is needed for the 8-byte control writes; try less if the
	 * device refuses the wanted size */
	for (; !qp && inline_want >= 8; inline_want /= 2) {
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = cq;
		ia.recv_cq = cq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = sq_depth;
		ia.srq = srq;
		ia.cap.max_recv_wr = srq ? 0 : 1;
		ia.cap.max_send_sge = (uint32_t)ib_dev_send_sge(d);
		ia.cap.max_recv_sge = 1;
		ia.cap.max_inline_data = inline_want;
		qp = ibv_create_qp(d->pd, &ia);
	}
	if (!qp) {
		/* the connection manager may close an idle connection and
		 * try again: ib_dev_qp_refused says why when it cannot */
		d->qp_errno = errno ? errno : ENOMEM;
		rdmach_debug("ib: ibv_create_qp on %s failed: %s", d->name,
			     strerror(d->qp_errno));
		return NULL;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = d->port;
	a.pkey_index = 0;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		rdmach_err("ib: QP to INIT on %s failed (%s)", d->name,
			   strerror(errno));
		ibv_destroy_qp(qp);
		return NULL;
	}
	*inline_max = ia.cap.max_inline_data;
	d->qps++;
	return qp;
}

void ib_dev_qp_refused(const struct ib_dev *d)
{
	rdmach_err("ib: ibv_create_qp on %s failed (%s): this process holds "
		   "%u QPs, the device %d for every process of this host "
		   "(max_qp); RDMACH_CONNECT=demand makes QPs only to the "
		   "peers a process talks to, and closes idle ones when the "
		   "device has none left", d->name, strerror(d->qp_errno),
		   d->qps, d->max_qp);
}

void ib_qp_destroy(struct ib_dev *d, struct ibv_qp *qp)
{
	ibv_destroy_qp(qp);
	d->qps--;
}

enum ibv_mtu ib_path_mtu(const struct ib_dev *d, const struct ib_addr *r,
			 const struct ib_qp_params *p)
{
	enum ibv_mtu mtu = p->mtu < d->active_mtu ? p->mtu : d->active_mtu;

	/* a larger MTU than the peer's port takes is dropped on its link,
	 * and its QP refuses packets longer than its own path MTU */
	if (r->mtu >= IBV_MTU_256 && r->mtu < (uint32_t)mtu)
		mtu = (enum ibv_mtu)r->mtu;
	return mtu;
}

int ib_qp_connect(struct ib_dev *d, struct ibv_qp *qp, uint32_t my_psn,
		  const struct ib_addr *r, const struct ib_qp_params *p)
{
	struct ibv_qp_attr a;
	int rd_atom = ib_dev_rd_atom(d);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = ib_path_mtu(d, r, p);
	a.dest_qp_num = r->qpn;
	a.rq_psn = r->psn;
	a.max_dest_rd_atomic = (uint8_t)rd_atom;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = d->port;
	a.ah_attr.dlid = r->lid;
	if (d->gid_index >= 0) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = r->gid;
		a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER)) {
		rdmach_err("ib: QP %u to RTR (remote qpn %u, lid %u) on %s "
			   "failed: %s", qp->qp_num, r->qpn, r->lid, d->name,
			   strerror(errno));
		return -EIO;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = p->timeout;
	a.retry_cnt = p->retry_cnt;
	a.rnr_retry = 7;
	a.sq_psn = my_psn;
	a.max_rd_atomic = (uint8_t)rd_atom;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
		rdmach_err("ib: QP %u to RTS on %s failed: %s", qp->qp_num,
			   d->name, strerror(errno));
		return -EIO;
	}
	return 0;
}

/* Can our port reach the peer's at all?  RoCE has no LIDs; a RoCE v2
 * packet carries an IPv4 or an IPv6 header, the same at both ends. */
int ib_dev_check_reach(const struct ib_dev *d, int peer,
		       const struct ib_addr *r)
{
	char g1[48], g2[48];

	if (d->is_roce && r->lid) {
		rdmach_err("ib: rank %d is on an InfiniBand port (LID %u), "
			   "this rank on RoCE (%s port %u): no path between "
			   "them", peer, r->lid, d->name, d->port);
		return -ENETUNREACH;
	}
	if (!d->is_roce && !r->lid) {
		rdmach_err("ib: rank %d has no LID (a RoCE port, or an "
			   "InfiniBand port without a subnet manager), this "
			   "rank is on InfiniBand (%s port %u, LID %u)", peer,
			   d->name, d->port, d->lid);
		return -ENETUNREACH;
	}
	if (d->is_roce &&
	    ib_gid_is_v4mapped(&r->gid) != ib_gid_is_v4mapped(&d->gid)) {
		rdmach_err("ib: rank %d's RoCE GID %s is %s, this rank's "
			   "(%s port %u GID %d) %s is %s: both ends need an "
			   "address of one IP family (an IPv4 address on "
			   "each host's RDMA interface, or RDMACH_IB_GID_INDEX)",
			   peer, ib_gid_str(&r->gid, g1, sizeof(g1)),
			   ib_gid_is_v4mapped(&r->gid) ? "IPv4" : "IPv6",
			   d->name, d->port, d->gid_index,
			   ib_gid_str(&d->gid, g2, sizeof(g2)),
			   ib_gid_is_v4mapped(&d->gid) ? "IPv4" : "IPv6");
		return -ENETUNREACH;
	}
	return 0;
}
