/* ib_tune.c - measuring the large-message model's figures on the device,
 * and the tuning cache file: see ib_tune.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "core/log.h"
#include "ib_dev.h"
#include "ib_tune.h"

#define IB_TUNE_REG_SMALL 4096u
#define IB_TUNE_REG_LARGE (1u << 20)
#define IB_TUNE_NET_LARGE (256u << 10)
#define IB_TUNE_GAP_WRS 32

/* ---- registration ------------------------------------------------------ */

/* Best time of reps ibv_reg_mr + ibv_dereg_mr of len bytes at buf; 0 if
 * registration fails. */
static double ib_tune_reg_once(struct ib_dev *dev, void *buf, size_t len,
			       int reps)
{
	double best = 0;
	int r;

	for (r = 0; r < reps; r++) {
		double t0 = rdmach_now_s(), dt;
		struct ibv_mr *mr = ibv_reg_mr(dev->pd, buf, len,
					       IBV_ACCESS_LOCAL_WRITE |
					       IBV_ACCESS_REMOTE_READ);

		if (!mr)
			return 0;
		ibv_dereg_mr(mr);
		dt = rdmach_now_s() - t0;
		if (best == 0 || dt < best)
			best = dt;
	}
	return best;
}

/* lambda_reg and B_reg from a 4 KiB and a 1 MiB registration of ordinary
 * pages (huge pages would pin faster than application memory does). */
static int ib_tune_reg(struct ib_dev *dev, struct tune_machine *m)
{
	size_t len = IB_TUNE_REG_LARGE;
	double small, large;
	void *buf = NULL;

	if (posix_memalign(&buf, 4096, len))
		return -ENOMEM;
#ifdef MADV_NOHUGEPAGE
	madvise(buf, len, MADV_NOHUGEPAGE);
#endif
	memset(buf, 3, len);
	small = ib_tune_reg_once(dev, buf, IB_TUNE_REG_SMALL, 3);
	large = ib_tune_reg_once(dev, buf, len, 2);
	free(buf);
	if (small <= 0 || large <= 0)
		return -EIO;
	/* the per-page cost may hide in the noise of the fixed one (an
	 * emulated CPU, a loaded host): then it is at most a tenth of it */
	if (large - small < small / 10)
		large = small + small / 10;
	m->breg = (double)(len - IB_TUNE_REG_SMALL) / (large - small);
	m->lat_reg = small - IB_TUNE_REG_SMALL / m->breg;
	if (m->lat_reg <= 0)
		m->lat_reg = small / 2;
	return 0;
}

/* ---- network: two QPs of the device connected to each other ------------ */

struct ib_tune_lb {
	struct ib_dev *dev;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static void ib_tune_lb_close(struct ib_tune_lb *lb)
{
	if (lb->a)
		ib_qp_destroy(lb->dev, lb->a);
	if (lb->b)
		ib_qp_destroy(lb->dev, lb->b);
	if (lb->mr)
		ibv_dereg_mr(lb->mr);
	if (lb->cq)
		ibv_destroy_cq(lb->cq);
}

static int ib_tune_lb_open(struct ib_dev *dev, uint8_t *buf, size_t len,
			   struct ib_tune_lb *lb)
{
	struct ib_qp_params qpp = { dev->active_mtu, 14, 7 };
	struct ib_addr aa, ab;
	unsigned int inl;

	memset(lb, 0, sizeof(*lb));
	lb->dev = dev;
	lb->buf = buf;
	lb->cq = ibv_create_cq(dev->ctx, 2 * IB_TUNE_GAP_WRS + 8, NULL, NULL,
			       0);
	lb->mr = ibv_reg_mr(dev->pd, buf, len, IBV_ACCESS_LOCAL_WRITE |
			    IBV_ACCESS_REMOTE_WRITE);
	if (!lb->cq || !lb->mr)
		return -ENOMEM;
	lb->a = ib_qp_create(dev, lb->cq, NULL, 2 * IB_TUNE_GAP_WRS, 64, &inl);
	lb->b = ib_qp_create(dev, lb->cq, NULL, 1, 8, &inl);
	if (!lb->a || !lb->b)
		return -EIO;
	memset(&aa, 0, sizeof(aa));
	aa.lid = dev->lid;
	aa.gid = dev->gid;
	ab = aa;
	aa.qpn = lb->a->qp_num;
	aa.psn = 0x1234;
	ab.qpn = lb->b->qp_num;
	ab.psn = 0x5678;
	if (ib_qp_connect(dev, lb->a, aa.psn, &ab, &qpp) ||
	    ib_qp_connect(dev, lb->b, ab.psn, &aa, &qpp))
		return -EIO;
	return 0;
}

/* Post n writes of len bytes (the last signalled), wait for the
 * completion; the time taken, or 0 on an error. */
static double ib_tune_lb_writes(struct ib_tune_lb *lb, int n, uint32_t len,
				uint32_t dst_off)
{
	double t0 = rdmach_now_s(), limit = t0 + 1.0;
	struct ibv_wc wc;
	int i, got;

	for (i = 0; i < n; i++) {
		struct ibv_sge sge = { (uintptr_t)lb->buf, len, lb->mr->lkey };
		struct ibv_send_wr wr, *bad;

		memset(&wr, 0, sizeof(wr));
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = i == n - 1 ? IBV_SEND_SIGNALED : 0;
		wr.wr.rdma.remote_addr = (uintptr_t)lb->buf + dst_off;
		wr.wr.rdma.rkey = lb->mr->rkey;
		if (ibv_post_send(lb->a, &wr, &bad))
			return 0;
	}
	while ((got = ibv_poll_cq(lb->cq, 1, &wc)) == 0)
		if (rdmach_now_s() > limit)
			return 0;
	if (got < 0 || wc.status != IBV_WC_SUCCESS)
		return 0;
	return rdmach_now_s() - t0;
}

static int ib_tune_net(struct ib_dev *dev, uint8_t *region,
		       struct tune_machine *m, double deadline)
{
	size_t len = 2 * IB_TUNE_NET_LARGE;
	double rtt = 0, big = 0, burst = 0, t;
	struct ib_tune_lb lb;
	int i, ret = -EIO;

	if (ib_tune_lb_open(dev, region, len, &lb))
		goto out;
	for (i = 0; i < 4; i++) {
		t = ib_tune_lb_writes(&lb, 1, 8, IB_TUNE_NET_LARGE);
		if (t <= 0)
			goto out;
		if (rtt == 0 || t < rtt)
			rtt = t;
	}
	for (i = 0; i < 2 && (i < 1 || rdmach_now_s() < deadline); i++) {
		t = ib_tune_lb_writes(&lb, IB_TUNE_GAP_WRS, 64,
				      IB_TUNE_NET_LARGE);
		if (t > 0 && (burst == 0 || t < burst))
			burst = t;
	}
	for (i = 0; i < 2 && (i < 1 || rdmach_now_s() < deadline); i++) {
		t = ib_tune_lb_writes(&lb, 1, IB_TUNE_NET_LARGE,
				      IB_TUNE_NET_LARGE);
		if (t > 0 && (big == 0 || t < big))
			big = t;
	}
	if (big <= rtt || burst <= 0)
		goto out;
	m->lat_net = rtt / 2;
	m->bnet = (double)IB_TUNE_NET_LARGE / (big - rtt);
	m->gap = burst > rtt ? (burst - rtt) / (IB_TUNE_GAP_WRS - 1) : 0;
	ret = 0;
out:
	ib_tune_lb_close(&lb);
	return ret;
}

static void ib_tune_measure(struct ib_dev *dev, struct ib_tune *t)
{
	struct tune_machine def, *m = &t->m;
	double t0 = rdmach_now_s(), deadline = t0 + IB_TUNE_BUDGET_S, t1;
	uint8_t *region = tune_region_alloc();

	tune_machine_default(&def);
	*m = def;
	t1 = rdmach_now_s();
	t->step_s[IB_TUNE_STEP_REGION] = t1 - t0;
	if (region)
		tune_measure_copy(m, region, IB_TUNE_BUDGET_S / 8);
	else
		rdmach_warn("ib: tuning: no memory to measure copies");
	t->step_s[IB_TUNE_STEP_COPY] = rdmach_now_s() - t1;
	t1 = rdmach_now_s();
	if (ib_tune_reg(dev, m))
		rdmach_warn("ib: tuning: cannot measure registration on %s; "
			    "using built-in figures", dev->name);
	t->step_s[IB_TUNE_STEP_REG] = rdmach_now_s() - t1;
	t1 = rdmach_now_s();
	if (!region || ib_tune_net(dev, region, m, deadline)) {
		rdmach_warn("ib: tuning: cannot measure RDMA writes on %s "
			    "port %u; using built-in figures", dev->name,
			    dev->port);
		m->lat_net = def.lat_net;
		m->bnet = def.bnet;
		m->gap = def.gap;
	}
	t->step_s[IB_TUNE_STEP_NET] = rdmach_now_s() - t1;
	tune_region_free(region);
	if (tune_machine_check(m))
		*m = def;
	m->measure_s = rdmach_now_s() - t0;
	rdmach_debug("ib: tuning measured in %.1f ms: memory %.1f, copies "
		     "%.1f, registration %.1f, RDMA writes %.1f",
		     m->measure_s * 1e3,
		     t->step_s[IB_TUNE_STEP_REGION] * 1e3,
		     t->step_s[IB_TUNE_STEP_COPY] * 1e3,
		     t->step_s[IB_TUNE_STEP_REG] * 1e3,
		     t->step_s[IB_TUNE_STEP_NET] * 1e3);
}

/* ---- cache file --------------------------------------------------------- */

static void ib_tune_default_file(const struct tune_key *k, char *out,
				 size_t len)
{
	const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	char host[sizeof(k->host)];
	size_t i;

	snprintf(host, sizeof(host), "%s", k->host);
	for (i = 0; host[i]; i++)
		if (host[i] == '/' || host[i] == ' ')
			host[i] = '_';
	if (x && *x)
		snprintf(out, len, "%s/rdmach/tune-%s-%s.conf", x, k->device,
			 host);
	else if (h && *h)
		snprintf(out, len, "%s/.cache/rdmach/tune-%s-%s.conf", h,
			 k->device, host);
	else
		out[0] = '\0';
}

static int ib_tune_read(const char *file, const struct tune_key *k,
			struct tune_machine *m)
{
	char text[4096];
	size_t n;
	FILE *f = fopen(file, "r");

	if (!f)
		return -errno;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	return tune_parse(text, k, m);
}

/* mkdir -p of file's directory. */
static void ib_tune_mkdirs(const char *file)
{
	char dir[512], *p;

	snprintf(dir, sizeof(dir), "%s", file);
	p = strrchr(dir, '/');
	if (!p || p == dir)
		return;
	*p = '\0';
	for (p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		mkdir(dir, 0755);
		*p = '/';
	}
	mkdir(dir, 0755);
}

/* Write atomically (another process may read or write it at once). */
static void ib_tune_write(const char *file, const struct tune_key *k,
			  const struct tune_machine *m)
{
	char text[4096], tmp[600];
	int n = tune_format(m, k, text, sizeof(text)), fd;

	if (n < 0)
		return;
	ib_tune_mkdirs(file);
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", file, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		rdmach_debug("ib: tuning: cannot write %s: %s", tmp,
			     strerror(errno));
		return;
	}
	if (write(fd, text, (size_t)n) != n || close(fd) ||
	    rename(tmp, file)) {
		rdmach_debug("ib: tuning: cannot write %s: %s", file,
			     strerror(errno));
		unlink(tmp);
	}
}

void ib_tune_run(struct ib_dev *dev, const char *mode, struct ib_tune *t)
{
	double t0 = rdmach_now_s();
	struct tune_key k;
	int ret;

	memset(t, 0, sizeof(*t));
	if (!strcmp(mode, "off")) {
		tune_machine_default(&t->m);
		snprintf(t->source, sizeof(t->source),
			 "built-in figures (RDMACH_TUNE=off)");
		return;
	}
	tune_key_local(&k, dev->name, dev->port);
	if (!strcmp(mode, "auto") || !strcmp(mode, "measure"))
		ib_tune_default_file(&k, t->file, sizeof(t->file));
	else
		snprintf(t->file, sizeof(t->file), "%s", mode);
	if (strcmp(mode, "measure") && t->file[0]) {
		ret = ib_tune_read(t->file, &k, &t->m);
		if (!ret) {
			t->elapsed_s = rdmach_now_s() - t0;
			snprintf(t->source, sizeof(t->source), "cache file");
			return;
		}
		if (ret != -ENOENT)
			rdmach_debug("ib: tuning file %s not used (%s): "
				     "measuring", t->file,
				     ret == -ESTALE ? "another machine or "
				     "version" : strerror(-ret));
	}
	ib_tune_measure(dev, t);
	t->elapsed_s = rdmach_now_s() - t0;
	snprintf(t->source, sizeof(t->source), "measured");
	if (t->file[0])
		ib_tune_write(t->file, &k, &t->m);
}
