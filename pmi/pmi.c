/*
 * pmi.c - PMI-1 wire-protocol client.
 *
 * The protocol is line oriented: one request line "cmd=NAME k=v k=v\n", one
 * reply line, in lock step.  Hydra's mpiexec and rdmach_launch (launch.c)
 * hand every process a connected socket as PMI_FD, with PMI_RANK and
 * PMI_SIZE.  Requests used here:
 *   init pmi_version=1 pmi_subversion=1 -> response_to_init ... rc=0
 *   get_maxes                           -> maxes kvsname_max= keylen_max= vallen_max=
 *   get_my_kvsname                      -> my_kvsname kvsname=
 *   put kvsname= key= value=            -> put_result rc=0
 *   barrier_in                          -> barrier_out [rc= msg=]
 *   get kvsname= key=                   -> get_result rc= [msg=] value=
 *   abort exitcode=                     (no reply)
 *   finalize                            -> finalize_ack
 * The server's maxima count the terminating NUL, so the longest value that
 * survives the exchange is vallen_max - 1 (Hydra silently truncates longer
 * ones: we refuse them instead).  A request line is also kept to
 * PMI_REQ_LINE_MAX bytes, newline included: Slurm's PMI-1 server (its
 * mpi/pmi2 plugin, 22.05) takes each request from one read() of at most
 * 1024 bytes, so a longer put arrives cut (its value truncated, the rest
 * read as a bogus command); MPICH's simple PMI has the same line limit.
 * The oob's value_max is therefore the smaller of vallen_max - 1 and what
 * a put with the longest key (keylen_max - 1) leaves of that line; a
 * server whose keylen_max leaves nothing is refused at init.
 *
 * The server's replies are input, checked before use:
 *  - a reply must come within RDMACH_PMI_TIMEOUT_MS (60 s), a barrier's
 *    within RDMACH_PMI_FENCE_TIMEOUT_MS (15 min: it waits for the slowest
 *    rank); else -ETIMEDOUT, naming the command waited for;
 *  - get_maxes' values are clamped to PMI_KVSNAME_LIMIT, PMI_KEYLEN_LIMIT
 *    and PMI_VALLEN_LIMIT, and a reply line longer than their sum plus
 *    PMI_LINE_SLACK is refused (-EMSGSIZE) rather than buffered;
 *  - lock step: a reply's first pair must be the cmd= its request expects,
 *    and nothing may follow it before the next request (a newline inside a
 *    value would otherwise answer the next request): -EPROTO;
 *  - after an exchange failed so (or timed out: its reply may still come),
 *    every later request is refused (-EPROTO; -ECONNRESET once the server
 *    closed the connection): no reply can be taken for another's;
 *  - the server's text in messages is escaped (rdmach_log_esc).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/knob.h"
#include "core/log.h"
#include "core/num.h"
#include "pmi_wire.h"
#include "rdmach_pmi.h"

#define PMI_LINE_SLACK 512	/* room for "cmd=... kvsname=... key=" */
/* Server maxima beyond these are clamped: they bound the reply buffer
 * (Hydra announces 256, 64 and 1024). */
#define PMI_KVSNAME_LIMIT 1024
#define PMI_KEYLEN_LIMIT 1024
#define PMI_VALLEN_LIMIT (64 * 1024)
#define PMI_ESC_MAX 256		/* a server's text quoted in a message */
/* The longest request line, '\n' included, that every server reads whole
 * (Slurm's mpi/pmi2 reads 1024 bytes per request). */
#define PMI_REQ_LINE_MAX 1024

enum { PMI_K_TIMEOUT, PMI_K_FENCE_TIMEOUT, PMI_K_NUM };

static const struct rdmach_knob pmi_knobs[PMI_K_NUM] = {
	[PMI_K_TIMEOUT] = { "RDMACH_PMI_TIMEOUT_MS", RDMACH_KNOB_UINT,
		"60000", 1, 86400000,
		"PMI client: longest wait for the server's reply to init, "
		"put, get or finalize, which it answers at once (60 s leaves "
		"room for a loaded machine); then the call fails with "
		"ETIMEDOUT; 0 waits forever", RDMACH_KNOB_ZERO_OFF },
	[PMI_K_FENCE_TIMEOUT] = { "RDMACH_PMI_FENCE_TIMEOUT_MS",
		RDMACH_KNOB_UINT, "900000", 1, 86400000,
		"PMI client: longest wait for a fence (barrier), which ends "
		"only when every rank has come: start-up under emulation or "
		"at scale takes minutes (15 min); 0 waits forever",
		RDMACH_KNOB_ZERO_OFF },
};
RDMACH_KNOB_TABLE(pmi, pmi_knobs);

struct rdmach_pmi {
	int fd;
	int rank;
	int size;
	size_t kvsname_max;	/* server maxima, NUL included */
	size_t keylen_max;
	size_t vallen_max;
	size_t value_max;	/* longest value a put carries (see above) */
	uint64_t timeout_ms[PMI_K_NUM];	/* 0: none */
	int broken;		/* a call's exchange failed: its error */
	char *kvsname;
	char *buf;		/* received bytes not yet consumed */
	size_t buf_len;
	size_t buf_cap;
	size_t buf_used;	/* length of the line handed out last */
};

int rdmach_pmi_available(void)
{
	const char *s = getenv("PMI_FD");

	return s && *s;
}

static int pmi_env_int(const char *name, int min, int *out)
{
	const char *s = getenv(name);
	uint64_t v;

	if (!s || !*s) {
		rdmach_err("PMI: %s is not set (not started by mpiexec or rdmach_run?)",
			   name);
		return -EINVAL;
	}
	if (rdmach_num(s, 10, 0x7fffffff, &v, NULL) || v < (uint64_t)min) {
		char esc[64];

		rdmach_err("PMI: %s=\"%s\" is not a number from %d to %d", name,
			   rdmach_log_esc(s, esc, sizeof(esc)), min, 0x7fffffff);
		return -EINVAL;
	}
	*out = (int)v;
	return 0;
}

static int pmi_write_all(struct rdmach_pmi *pmi, const char *p, size_t len,
			 const char *what)
{
	while (len) {
		ssize_t n = send(pmi->fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == ENOTSOCK)
			n = write(pmi->fd, p, len);
		if (n < 0) {
			int err = errno;

			if (err == EINTR)
				continue;
			if (err == EPIPE || err == ECONNRESET) {
				rdmach_err("PMI %s: the PMI server closed the connection",
					   what);
				return -ECONNRESET;
			}
			rdmach_err("PMI %s: write to PMI_FD %d failed: %s", what,
				   pmi->fd, strerror(err));
			return -err;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The longest reply line the server's maxima allow. */
static size_t pmi_line_max(const struct rdmach_pmi *pmi)
{
	return pmi->kvsname_max + pmi->keylen_max + pmi->vallen_max +
	       PMI_LINE_SLACK;
}

/* The line handed out last leaves the buffer. */
static void pmi_drop_used(struct rdmach_pmi *pmi)
{
	if (!pmi->buf_used)
		return;
	pmi->buf_len -= pmi->buf_used;
	memmove(pmi->buf, pmi->buf + pmi->buf_used, pmi->buf_len);
	pmi->buf_used = 0;
}

/* Room for at least one more byte and the NUL, up to line_max + 1. */
static int pmi_grow(struct rdmach_pmi *pmi, size_t line_max)
{
	size_t cap = pmi->buf_cap * 2;
	char *b;

	if (pmi->buf_len + 1 < pmi->buf_cap)
		return 0;
	if (cap > line_max + 1)
		cap = line_max + 1;
	b = realloc(pmi->buf, cap);
	if (!b)
		return -ENOMEM;
	pmi->buf = b;
	pmi->buf_cap = cap;
	return 0;
}

/* Which timeout a request's reply is waited for with. */
static int pmi_timeout_knob(const char *expect)
{
	return strcmp(expect, "barrier_out") ? PMI_K_TIMEOUT :
					       PMI_K_FENCE_TIMEOUT;
}

/* Wait for bytes until deadline_ns (0: forever). */
static int pmi_wait(struct rdmach_pmi *pmi, uint64_t deadline_ns,
		    const char *what, const char *expect)
{
	struct pollfd pfd = { pmi->fd, POLLIN, 0 };
	int k = pmi_timeout_knob(expect);

	for (;;) {
		uint64_t now = rdmach_now_ns();
		int ms = -1, n;

		if (deadline_ns) {
			uint64_t left = deadline_ns > now ? deadline_ns - now : 0;

			ms = left / 1000000 > 3600000 ? 3600000 :
			     (int)((left + 999999) / 1000000);
		}
		n = poll(&pfd, 1, ms);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR) {
			int err = errno;

			rdmach_err("PMI %s: poll on PMI_FD %d failed: %s", what,
				   pmi->fd, strerror(err));
			return -err;
		}
		if (n == 0 && ms >= 0 && rdmach_now_ns() >= deadline_ns) {
			rdmach_err("PMI %s: no reply (cmd=%s) from the PMI server "
				   "within %llu ms (%s)", what, expect,
				   (unsigned long long)pmi->timeout_ms[k],
				   pmi_knobs[k].name);
			return -ETIMEDOUT;
		}
	}
}

/* Append what the server sent to the buffer: bytes read, or -errno. */
static ssize_t pmi_recv(struct rdmach_pmi *pmi, const char *what)
{
	ssize_t n;

	do {
		n = read(pmi->fd, pmi->buf + pmi->buf_len,
			 pmi->buf_cap - pmi->buf_len - 1);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		int err = errno;

		rdmach_err("PMI %s: read from PMI_FD %d failed: %s", what,
			   pmi->fd, strerror(err));
		return -err;
	}
	if (n == 0) {
		rdmach_err("PMI %s: PMI server closed the connection", what);
		return -ECONNRESET;
	}
	pmi->buf_len += (size_t)n;
	return n;
}

/* Hand out the line ending at nl; lock step: nothing may follow it. */
static int pmi_take_line(struct rdmach_pmi *pmi, char *nl, char **linep,
			 const char *what)
{
	char esc[PMI_ESC_MAX];

	*nl = '\0';
	pmi->buf_used = (size_t)(nl - pmi->buf) + 1;
	if (pmi->buf_used < pmi->buf_len) {
		pmi->buf[pmi->buf_len] = '\0';
		rdmach_err("PMI %s: the PMI server sent more than one line in "
			   "reply (a newline inside a value?): \"%s\" follows",
			   what, rdmach_log_esc(nl + 1, esc, sizeof(esc)));
		pmi->buf_len = pmi->buf_used = 0;
		return -EPROTO;
	}
	*linep = pmi->buf;
	return 0;
}

/* Read one reply line (NUL-terminated, without '\n') into pmi->buf. */
static int pmi_read_line(struct rdmach_pmi *pmi, char **linep,
			 const char *what, const char *expect)
{
	uint64_t ms = pmi->timeout_ms[pmi_timeout_knob(expect)];
	uint64_t deadline = ms ? rdmach_now_ns() + ms * 1000000u : 0;
	size_t line_max = pmi_line_max(pmi);
	ssize_t n;
	int ret;

	pmi_drop_used(pmi);
	for (;;) {
		char *nl = memchr(pmi->buf, '\n', pmi->buf_len);

		if (nl)
			return pmi_take_line(pmi, nl, linep, what);
		if (pmi->buf_len >= line_max) {
			rdmach_err("PMI %s: reply (cmd=%s expected) longer than "
				   "%zu bytes, the server's maxima allow",
				   what, expect, line_max);
			pmi->buf_len = 0;
			return -EMSGSIZE;
		}
		ret = pmi_grow(pmi, line_max);
		if (!ret)
			ret = pmi_wait(pmi, deadline, what, expect);
		if (ret)
			return ret;
		n = pmi_recv(pmi, what);
		if (n < 0)
			return (int)n;
	}
}

/* Lock step: no byte may come between a reply and the next request (a
 * second line would be taken as that request's reply). */
static int pmi_check_idle(struct rdmach_pmi *pmi, const char *what)
{
	struct pollfd pfd = { pmi->fd, POLLIN, 0 };
	char esc[PMI_ESC_MAX];
	ssize_t n;

	pmi_drop_used(pmi);
	if (poll(&pfd, 1, 0) <= 0 || !(pfd.revents & POLLIN) ||
	    pmi_grow(pmi, pmi_line_max(pmi)))
		return 0;
	n = read(pmi->fd, pmi->buf, pmi->buf_cap - 1);
	if (n <= 0)
		return 0;	/* closed: the request will say so */
	pmi->buf[n] = '\0';
	rdmach_err("PMI %s: unsolicited data from the PMI server before the "
		   "request (a newline inside a value?): \"%s\"", what,
		   rdmach_log_esc(pmi->buf, esc, sizeof(esc)));
	pmi->buf_len = 0;
	return -EPROTO;
}

/* A reply whose rc is not 0 (a malformed one counts as failure): err,
 * with a message naming what failed, the rc and the server's msg. */
static int pmi_check_rc(const struct pmi_wire_msg *rep, const char *what,
			int err)
{
	const char *rc = pmi_wire_attr(rep, "rc");
	const char *msg = pmi_wire_attr(rep, "msg");
	char erc[32], emsg[PMI_ESC_MAX];

	if (!rc || !strcmp(rc, "0"))
		return 0;
	rdmach_err("PMI %s failed: rc=%s (%s)", what,
		   rdmach_log_esc(rc, erc, sizeof(erc)),
		   msg ? rdmach_log_esc(msg, emsg, sizeof(emsg)) : "no message");
	return err;
}

static int pmi_send(struct rdmach_pmi *pmi, const char *what,
		    const char *fmt, va_list ap)
{
	va_list ap2;
	char *line;
	int len, ret;

	va_copy(ap2, ap);
	len = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (len < 0)
		return -EINVAL;
	line = malloc((size_t)len + 2);
	if (!line)
		return -ENOMEM;
	vsnprintf(line, (size_t)len + 1, fmt, ap);
	line[len] = '\n';
	ret = pmi_write_all(pmi, line, (size_t)len + 1, what);
	free(line);
	return ret;
}

static int pmi_send_line(struct rdmach_pmi *pmi, const char *what,
			 const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int pmi_send_line(struct rdmach_pmi *pmi, const char *what,
			 const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = pmi_send(pmi, what, fmt, ap);
	va_end(ap);
	return ret;
}

/* The reply line must open with cmd=expect. */
static int pmi_parse_reply(char *line, const char *what, const char *expect,
			   struct pmi_wire_msg *rep)
{
	char esc[PMI_ESC_MAX];
	struct pmi_wire_msg m;

	rdmach_log_esc(line, esc, sizeof(esc));	/* parsing splits line */
	rdmach_debug("PMI %s: reply \"%s\"", what, esc);
	if (pmi_wire_parse(line, &m) || !m.nattr ||
	    strcmp(m.attr[0].key, "cmd") || strcmp(m.attr[0].val, expect)) {
		rdmach_err("PMI %s: expected cmd=%s from the PMI server, got "
			   "\"%s\"", what, expect, esc);
		return -EPROTO;
	}
	*rep = m;
	return 0;
}

/* After a failed exchange (a timeout, a reply out of step) a late or extra
 * reply could be taken for the next request's: no more requests. */
static int pmi_check_broken(const struct rdmach_pmi *pmi, const char *what)
{
	if (!pmi->broken)
		return 0;
	rdmach_err("PMI %s: not sent: an earlier exchange with the PMI server "
		   "failed (%s), its replies could be out of step", what,
		   strerror(-pmi->broken));
	return pmi->broken == -ECONNRESET ? -ECONNRESET : -EPROTO;
}

/* Send a request and read a reply whose cmd must be `expect`. */
static int pmi_call(struct rdmach_pmi *pmi, const char *what,
		    const char *expect, struct pmi_wire_msg *rep,
		    const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int pmi_call(struct rdmach_pmi *pmi, const char *what,
		    const char *expect, struct pmi_wire_msg *rep,
		    const char *fmt, ...)
{
	va_list ap;
	char *line = NULL;
	int ret;

	ret = pmi_check_broken(pmi, what);
	if (!ret)
		ret = pmi_check_idle(pmi, what);
	if (ret)
		return ret;
	va_start(ap, fmt);
	ret = pmi_send(pmi, what, fmt, ap);
	va_end(ap);
	if (!ret)
		ret = pmi_read_line(pmi, &line, what, expect);
	if (!ret)
		ret = pmi_parse_reply(line, what, expect, rep);
	if (ret)
		pmi->broken = ret;
	return ret;
}

/* A get_maxes value: decimal, at least min; above limit, limit (it only
 * bounds what this client sends and buffers). */
static int pmi_size_attr(const struct pmi_wire_msg *rep, const char *key,
			 size_t min, size_t limit, size_t *out)
{
	const char *s = pmi_wire_attr(rep, key);
	uint64_t v;
	char esc[64];

	if (!s || rdmach_num(s, 10, UINT64_MAX, &v, NULL) || v < min) {
		rdmach_err("PMI get_maxes: %s=%s is missing or not a number of "
			   "at least %zu", key,
			   rdmach_log_esc(s ? s : "", esc, sizeof(esc)), min);
		return -EPROTO;
	}
	if (v > limit) {
		rdmach_debug("PMI get_maxes: %s=%llu taken as %zu", key,
			     (unsigned long long)v, limit);
		v = limit;
	}
	*out = (size_t)v;
	return 0;
}

/* Keys, values and the kvs name travel as space-separated tokens. */
static int pmi_check_token(const char *what, const char *s, size_t max,
			   const char *noun)
{
	int is_key = !strcmp(noun, "key");
	size_t len = strlen(s);
	const char *p;

	if (is_key && !len) {
		rdmach_err("PMI %s: empty key", what);
		return -EINVAL;
	}
	if (len > max) {
		rdmach_err("PMI %s: %s of %zu bytes exceeds the PMI server's limit of %zu",
			   what, noun, len, max);
		return -EMSGSIZE;
	}
	for (p = s; *p; p++) {
		if (*p <= ' ' || *p == 0x7f || (is_key && *p == '=')) {
			rdmach_err("PMI %s: character 0x%02x at offset %zu of a %s is not allowed",
				   what, (unsigned char)*p, (size_t)(p - s),
				   noun);
			return -EINVAL;
		}
	}
	return 0;
}

static int pmi_oob_put(void *arg, const char *key, const char *value)
{
	struct rdmach_pmi *pmi = arg;
	struct pmi_wire_msg rep;
	char what[128];
	int ret;

	if (!pmi || !key || !value)
		return -EINVAL;
	ret = pmi_check_token("put", key, pmi->keylen_max - 1, "key");
	if (!ret)
		ret = pmi_check_token("put", value, pmi->value_max, "value");
	if (ret)
		return ret;
	ret = pmi_call(pmi, "put", "put_result", &rep,
		       "cmd=put kvsname=%s key=%s value=%s", pmi->kvsname, key,
		       value);
	if (ret)
		return ret;
	snprintf(what, sizeof(what), "put of key %.100s", key);
	return pmi_check_rc(&rep, what, -EIO);
}

static int pmi_oob_fence(void *arg)
{
	return rdmach_pmi_barrier(arg);
}

static int pmi_oob_get(void *arg, const char *key, char *value, size_t len)
{
	struct rdmach_pmi *pmi = arg;
	struct pmi_wire_msg rep;
	const char *val;
	char what[128];
	size_t vlen;
	int ret;

	if (!pmi || !key || !value || !len)
		return -EINVAL;
	ret = pmi_check_token("get", key, pmi->keylen_max - 1, "key");
	if (ret)
		return ret;
	ret = pmi_call(pmi, "get", "get_result", &rep,
		       "cmd=get kvsname=%s key=%s", pmi->kvsname, key);
	if (ret)
		return ret;
	snprintf(what, sizeof(what), "get of key %.100s", key);
	ret = pmi_check_rc(&rep, what, -ENOENT);
	if (ret)
		return ret;
	val = pmi_wire_attr(&rep, "value");
	if (!val) {
		rdmach_err("PMI get of key %s: reply without a value", key);
		return -EPROTO;
	}
	vlen = strlen(val);
	if (vlen >= len) {
		rdmach_err("PMI get of key %s: value of %zu bytes does not fit a buffer of %zu",
			   key, vlen, len);
		return -EMSGSIZE;
	}
	memcpy(value, val, vlen + 1);
	return 0;
}

int rdmach_pmi_barrier(rdmach_pmi_t *pmi)
{
	struct pmi_wire_msg rep;
	int ret;

	if (!pmi)
		return -EINVAL;
	ret = pmi_call(pmi, "barrier", "barrier_out", &rep, "cmd=barrier_in");
	return ret ? ret : pmi_check_rc(&rep, "barrier", -ECONNRESET);
}

/* The longest value: within vallen_max, and such that a put with the
 * longest key fits a request line of PMI_REQ_LINE_MAX bytes (0 when
 * nothing fits: the handshake fails, naming the sizes). */
static void pmi_set_value_max(struct rdmach_pmi *pmi)
{
	size_t fixed = strlen("cmd=put kvsname=") + strlen(pmi->kvsname) +
		       strlen(" key=") + (pmi->keylen_max - 1) +
		       strlen(" value=") + 1;
	size_t line = fixed < PMI_REQ_LINE_MAX ? PMI_REQ_LINE_MAX - fixed : 0;

	pmi->value_max = pmi->vallen_max - 1;
	if (line < pmi->value_max) {
		rdmach_debug("PMI: values of %zu bytes at most (vallen_max %zu): "
			     "a put line stays within %d bytes", line,
			     pmi->vallen_max, PMI_REQ_LINE_MAX);
		pmi->value_max = line;
	}
}

/* init, get_maxes, get_my_kvsname. */
static int pmi_handshake(struct rdmach_pmi *pmi)
{
	struct pmi_wire_msg rep;
	const char *name;
	int ret;

	ret = pmi_call(pmi, "init", "response_to_init", &rep,
		       "cmd=init pmi_version=1 pmi_subversion=1");
	if (!ret)
		ret = pmi_check_rc(&rep, "init", -EPROTO);
	if (!ret)
		ret = pmi_call(pmi, "get_maxes", "maxes", &rep,
			       "cmd=get_maxes");
	if (!ret)
		ret = pmi_size_attr(&rep, "kvsname_max", 2, PMI_KVSNAME_LIMIT,
				    &pmi->kvsname_max);
	if (!ret)
		ret = pmi_size_attr(&rep, "keylen_max", 2, PMI_KEYLEN_LIMIT,
				    &pmi->keylen_max);
	if (!ret)
		ret = pmi_size_attr(&rep, "vallen_max", 2, PMI_VALLEN_LIMIT,
				    &pmi->vallen_max);
	if (ret)
		return ret;
	ret = pmi_call(pmi, "get_my_kvsname", "my_kvsname", &rep,
		       "cmd=get_my_kvsname");
	if (ret)
		return ret;
	name = pmi_wire_attr(&rep, "kvsname");
	if (!name || !*name) {
		rdmach_err("PMI get_my_kvsname: no kvsname in the reply");
		return -EPROTO;
	}
	/* It goes back in every put and get. */
	if (pmi_check_token("get_my_kvsname", name, pmi->kvsname_max - 1,
			    "kvsname"))
		return -EPROTO;
	pmi->kvsname = strdup(name);
	if (!pmi->kvsname)
		return -ENOMEM;
	pmi_set_value_max(pmi);
	if (!pmi->value_max) {
		rdmach_err("PMI get_maxes: keylen_max %zu (at most %d taken) "
			   "leaves no room for a value in a put line of %d "
			   "bytes", pmi->keylen_max, PMI_KEYLEN_LIMIT,
			   PMI_REQ_LINE_MAX);
		return -EPROTO;
	}
	return 0;
}

static int pmi_read_knobs(struct rdmach_pmi *pmi)
{
	int k, ret;

	for (k = 0; k < PMI_K_NUM; k++) {
		ret = rdmach_knob_u64(&pmi_knobs[k], &pmi->timeout_ms[k]);
		if (ret)
			return ret;
	}
	return 0;
}

static void pmi_free(struct rdmach_pmi *pmi)
{
	if (pmi->fd >= 0)
		close(pmi->fd);
	free(pmi->kvsname);
	free(pmi->buf);
	free(pmi);
}

int rdmach_pmi_init(rdmach_pmi_t **pmip, rdmach_oob_t *oob)
{
	struct rdmach_pmi *pmi;
	int fd, ret;

	if (!pmip || !oob)
		return -EINVAL;
	pmi = calloc(1, sizeof(*pmi));
	if (!pmi)
		return -ENOMEM;
	pmi->fd = -1;
	/* Until get_maxes answers: PMI-1's smallest limits. */
	pmi->kvsname_max = 256;
	pmi->keylen_max = 64;
	pmi->vallen_max = 256;
	pmi->buf_cap = 1024;
	pmi->buf = malloc(pmi->buf_cap);
	if (!pmi->buf) {
		ret = -ENOMEM;
		goto err_free;
	}
	ret = pmi_env_int("PMI_FD", 0, &fd);
	if (!ret)
		ret = pmi_env_int("PMI_RANK", 0, &pmi->rank);
	if (!ret)
		ret = pmi_env_int("PMI_SIZE", 1, &pmi->size);
	if (!ret)
		ret = pmi_read_knobs(pmi);
	if (ret)
		goto err_free;
	if (pmi->rank >= pmi->size) {
		rdmach_err("PMI: PMI_RANK=%d is not below PMI_SIZE=%d", pmi->rank,
			   pmi->size);
		ret = -EINVAL;
		goto err_free;
	}
	/* Programs this rank execs must not inherit the connection. */
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		rdmach_err("PMI: PMI_FD=%d is not an open file descriptor: %s", fd,
			   strerror(errno));
		ret = -EBADF;
		goto err_free;
	}
	pmi->fd = fd;
	if (rdmach_log_rank < 0)
		rdmach_log_rank = pmi->rank;
	ret = pmi_handshake(pmi);
	if (ret)
		goto err_free;
	rdmach_debug("PMI: rank %d of %d, kvs %s, vallen_max %zu", pmi->rank,
		     pmi->size, pmi->kvsname, pmi->vallen_max);

	memset(oob, 0, sizeof(*oob));
	oob->rank = pmi->rank;
	oob->size = pmi->size;
	oob->value_max = pmi->value_max;
	oob->arg = pmi;
	oob->put = pmi_oob_put;
	oob->fence = pmi_oob_fence;
	oob->get = pmi_oob_get;
	*pmip = pmi;
	return 0;

err_free:
	pmi_free(pmi);
	return ret;
}

int rdmach_pmi_abort(rdmach_pmi_t *pmi, int exit_code, const char *msg)
{
	char text[256];
	size_t i;

	if (!pmi)
		return -EINVAL;
	/* The message travels as one token: blanks become '_'. */
	snprintf(text, sizeof(text), "%s", msg ? msg : "");
	for (i = 0; text[i]; i++)
		if (text[i] <= ' ' || text[i] == 0x7f)
			text[i] = '_';
	return pmi_send_line(pmi, "abort", "cmd=abort exitcode=%d%s%s",
			     exit_code, text[0] ? " message=" : "", text);
}

int rdmach_pmi_finalize(rdmach_pmi_t *pmi)
{
	struct pmi_wire_msg rep;
	int ret;

	if (!pmi)
		return -EINVAL;
	ret = pmi_call(pmi, "finalize", "finalize_ack", &rep, "cmd=finalize");
	pmi_free(pmi);
	return ret;
}
