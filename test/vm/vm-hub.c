/*
 * vm-hub.c - the Ethernet switch of the test cluster (test/vm/vm-cluster.sh).
 *
 * Each VM's NIC is a QEMU "-netdev stream" client that connects over TCP to
 * its own port of this switch on 127.0.0.1 (the switch binds ephemeral
 * ports and writes them, one per line, to PORTFILE).  Frames travel with
 * QEMU's stream framing: a 4-byte big-endian length, then the frame.  A
 * frame goes to the port that owns its destination MAC (learned from source
 * MACs), or to every other port (broadcast, multicast, unknown).  Nothing
 * ever leaves this machine: the sockets are bound to 127.0.0.1 and the
 * switch only copies frames between its own ports.
 *
 * What a real network does, on demand:
 *   -m MTU,MTU,...   a frame longer than the destination port's MTU (plus
 *                    the Ethernet header) is dropped, as the receiving NIC
 *                    of a real link would;
 *   "down N" / "up N" on the command FIFO (-c): port N's cable is pulled or
 *                    plugged back (frames to and from it are dropped; the
 *                    guest sees no carrier change, like a fault further
 *                    along the wire).  "stats" prints the counters.
 * The network is lossless, as RoCE fabrics are (priority flow control):
 * when a frame's destination queue is full, the switch stops reading from
 * the sender's port until the queue drains (the sender's QEMU then holds
 * its guest's transmit queue).  Only a port that is down, or a VM that is
 * gone, loses frames.
 *
 * It ends by itself: when every port that connected has closed again, when
 * no VM connected within -t seconds, after -T seconds in all, when its
 * parent dies, or on SIGTERM/SIGINT/SIGHUP.  Counters go to stderr at exit.
 *
 * usage: vm-hub -n PORTS -o PORTFILE [-m MTUS] [-c FIFO] [-t S] [-T S]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HUB_MAX_PORTS	8
#define HUB_FRAME_MAX	65536		/* QEMU's NET_BUFSIZE is 68 KiB */
#define HUB_RX_BUF	(4 + HUB_FRAME_MAX)
#define HUB_TX_BUF	(1u << 20)	/* per port output queue */
#define HUB_MACS	64
#define HUB_ETH_HDR	18		/* header + one VLAN tag */

struct hub_port {
	int lfd;			/* listening socket */
	int fd;				/* the VM's connection, or -1 */
	int seen;			/* has connected at least once */
	int down;			/* cable pulled */
	unsigned int mtu;		/* 0: no limit */
	uint16_t lport;
	uint8_t rx[HUB_RX_BUF];
	size_t rx_len;
	uint8_t *tx;
	size_t tx_head, tx_len;		/* queued bytes: tx[tx_head..+tx_len) */
	size_t rx_off;			/* whole frames start here in rx */
	int paused;			/* a frame waits for room elsewhere */
	uint64_t in, out, pauses, drop_mtu, drop_down;
};

struct hub_mac {
	uint8_t mac[6];
	int port;
	uint64_t used;
};

static struct hub_port hub_ports[HUB_MAX_PORTS];
static int hub_nports;
static struct hub_mac hub_macs[HUB_MACS];
static uint64_t hub_clock;		/* counts learned entries (LRU age) */
static volatile sig_atomic_t hub_stop;

static void hub_on_signal(int sig)
{
	(void)sig;
	hub_stop = 1;
}

static double hub_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int hub_listen(struct hub_port *p)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int one = 1;

	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->lfd < 0)
		return -errno;
	setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);	/* 127.0.0.1 only */
	a.sin_port = 0;
	if (bind(p->lfd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(p->lfd, 1) ||
	    getsockname(p->lfd, (struct sockaddr *)&a, &len))
		return -errno;
	p->lport = ntohs(a.sin_port);
	return 0;
}

static void hub_close_port(struct hub_port *p, const char *why)
{
	int i;

	fprintf(stderr, "vm-hub: port %d closed (%s)\n",
		(int)(p - hub_ports), why);
	close(p->fd);
	p->fd = -1;
	p->rx_len = 0;
	p->tx_head = p->tx_len = 0;
	for (i = 0; i < HUB_MACS; i++)
		if (hub_macs[i].port == (int)(p - hub_ports))
			hub_macs[i].port = -1;
}

/* Write what is queued for p without blocking. */
static void hub_flush(struct hub_port *p)
{
	while (p->fd >= 0 && p->tx_len) {
		ssize_t n = send(p->fd, p->tx + p->tx_head, p->tx_len,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				hub_close_port(p, strerror(errno));
			return;
		}
		p->tx_head += (size_t)n;
		p->tx_len -= (size_t)n;
	}
	if (!p->tx_len)
		p->tx_head = 0;
}

/* Queue one framed packet (length prefix included) for port p. */
static void hub_send(struct hub_port *p, const uint8_t *pkt, size_t len)
{
	size_t flen = len - 4;

	if (p->fd < 0)
		return;
	if (p->down) {
		p->drop_down++;
		return;
	}
	if (p->mtu && flen > p->mtu + HUB_ETH_HDR) {
		p->drop_mtu++;
		return;
	}
	if (p->tx_head && p->tx_head + p->tx_len + len > HUB_TX_BUF) {
		memmove(p->tx, p->tx + p->tx_head, p->tx_len);
		p->tx_head = 0;
	}
	memcpy(p->tx + p->tx_head + p->tx_len, pkt, len);
	p->tx_len += len;
	p->out++;
	hub_flush(p);
}

static int hub_lookup(const uint8_t *mac)
{
	int i;

	for (i = 0; i < HUB_MACS; i++)
		if (hub_macs[i].port >= 0 && !memcmp(hub_macs[i].mac, mac, 6)) {
			hub_macs[i].used = ++hub_clock;
			return hub_macs[i].port;
		}
	return -1;
}

static void hub_learn(const uint8_t *mac, int port)
{
	int i, victim = 0;

	if (mac[0] & 1)
		return;
	for (i = 0; i < HUB_MACS; i++) {
		if (hub_macs[i].port >= 0 && !memcmp(hub_macs[i].mac, mac, 6)) {
			hub_macs[i].port = port;
			hub_macs[i].used = ++hub_clock;
			return;
		}
		if (hub_macs[i].port < 0 ||
		    hub_macs[i].used < hub_macs[victim].used)
			victim = i;
	}
	memcpy(hub_macs[victim].mac, mac, 6);
	hub_macs[victim].port = port;
	hub_macs[victim].used = ++hub_clock;
}

/* Can port p queue len more bytes (or will it drop them anyway)? */
static int hub_room(const struct hub_port *p, size_t len)
{
	return p->fd < 0 || p->down || p->tx_len + len <= HUB_TX_BUF;
}

/* One frame (prefix included) arrived on port `from`: 1 if it went (or
 * was dropped), 0 if a destination has no room yet (pause the sender). */
static int hub_forward(int from, const uint8_t *pkt, size_t len)
{
	const uint8_t *eth = pkt + 4;
	struct hub_port *src = &hub_ports[from];
	int to, i;

	if (src->down) {
		src->in++;
		src->drop_down++;
		return 1;
	}
	if (len - 4 < 14)
		return 1;
	to = (eth[0] & 1) ? -1 : hub_lookup(eth);
	if (to == from)
		return 1;
	for (i = 0; i < hub_nports; i++)
		if ((to < 0 ? i != from : i == to) &&
		    !hub_room(&hub_ports[i], len))
			return 0;
	src->in++;
	hub_learn(eth + 6, from);
	if (to >= 0) {
		hub_send(&hub_ports[to], pkt, len);
		return 1;
	}
	for (i = 0; i < hub_nports; i++)
		if (i != from)
			hub_send(&hub_ports[i], pkt, len);
	return 1;
}

/* Forward the whole frames in port's receive buffer, as far as the
 * destinations take them. */
static int hub_drain_rx(int port)
{
	struct hub_port *p = &hub_ports[port];
	size_t off = p->rx_off;

	p->paused = 0;
	while (p->rx_len - off >= 4) {
		uint32_t flen = (uint32_t)p->rx[off] << 24 |
				(uint32_t)p->rx[off + 1] << 16 |
				(uint32_t)p->rx[off + 2] << 8 | p->rx[off + 3];

		if (flen > HUB_FRAME_MAX) {
			hub_close_port(p, "bad frame length");
			return -1;
		}
		if (p->rx_len - off < 4 + flen)
			break;
		if (!hub_forward(port, p->rx + off, 4 + flen)) {
			p->paused = 1;
			p->pauses++;
			break;
		}
		off += 4 + flen;
	}
	if (off) {
		memmove(p->rx, p->rx + off, p->rx_len - off);
		p->rx_len -= off;
	}
	p->rx_off = 0;
	return 0;
}

/* Read what port p has and forward every whole frame; -1 if it closed. */
static int hub_read(int port)
{
	struct hub_port *p = &hub_ports[port];
	ssize_t n;

	if (p->paused || p->rx_len == sizeof(p->rx))
		return 0;
	n = recv(p->fd, p->rx + p->rx_len, sizeof(p->rx) - p->rx_len,
		 MSG_DONTWAIT);
	if (n == 0) {
		hub_close_port(p, "the VM is gone");
		return -1;
	}
	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		hub_close_port(p, strerror(errno));
		return -1;
	}
	p->rx_len += (size_t)n;
	return hub_drain_rx(port);
}

static void hub_stats(void)
{
	int i;

	for (i = 0; i < hub_nports; i++) {
		struct hub_port *p = &hub_ports[i];

		fprintf(stderr, "vm-hub: port %d (127.0.0.1:%u, mtu %u%s): "
			"%llu frames in, %llu out, %llu pauses (a full queue "
			"elsewhere), dropped %llu over MTU, %llu link down\n",
			i, p->lport, p->mtu, p->down ? ", down" : "",
			(unsigned long long)p->in, (unsigned long long)p->out,
			(unsigned long long)p->pauses,
			(unsigned long long)p->drop_mtu,
			(unsigned long long)p->drop_down);
	}
}

/* Commands from the FIFO: "down N", "up N", "stats". */
static void hub_command(int fd)
{
	static char buf[256];
	static size_t len;
	char *nl;
	ssize_t n;

	n = read(fd, buf + len, sizeof(buf) - 1 - len);
	if (n <= 0)
		return;
	len += (size_t)n;
	buf[len] = 0;
	while ((nl = strchr(buf, '\n'))) {
		int port = -1;

		*nl = 0;
		if (sscanf(buf, "down %d", &port) == 1 && port >= 0 &&
		    port < hub_nports) {
			hub_ports[port].down = 1;
			fprintf(stderr, "vm-hub: port %d down\n", port);
		} else if (sscanf(buf, "up %d", &port) == 1 && port >= 0 &&
			   port < hub_nports) {
			hub_ports[port].down = 0;
			fprintf(stderr, "vm-hub: port %d up\n", port);
		} else if (!strcmp(buf, "stats")) {
			hub_stats();
		} else if (buf[0]) {
			fprintf(stderr, "vm-hub: unknown command \"%s\"\n", buf);
		}
		len -= (size_t)(nl + 1 - buf);
		memmove(buf, nl + 1, len + 1);
	}
	if (len == sizeof(buf) - 1)
		len = 0;		/* a line too long: forget it */
}

static void usage(void)
{
	fprintf(stderr, "usage: vm-hub -n PORTS -o PORTFILE [-m MTU,MTU,...] "
		"[-c FIFO] [-t CONNECT_S] [-T LIFETIME_S]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *portfile = NULL, *mtus = NULL, *fifo = NULL;
	double connect_s = 120, life_s = 4 * 3600, t0;
	struct pollfd pfd[2 * HUB_MAX_PORTS + 1];
	pid_t parent = getppid();
	int i, c, cmd_fd = -1;
	FILE *f;

	while ((c = getopt(argc, argv, "n:o:m:c:t:T:h")) != -1) {
		switch (c) {
		case 'n': hub_nports = atoi(optarg); break;
		case 'o': portfile = optarg; break;
		case 'm': mtus = optarg; break;
		case 'c': fifo = optarg; break;
		case 't': connect_s = atof(optarg); break;
		case 'T': life_s = atof(optarg); break;
		default: usage();
		}
	}
	if (hub_nports < 2 || hub_nports > HUB_MAX_PORTS || !portfile ||
	    optind != argc)
		usage();
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	signal(SIGTERM, hub_on_signal);
	signal(SIGINT, hub_on_signal);
	signal(SIGHUP, hub_on_signal);
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < HUB_MACS; i++)
		hub_macs[i].port = -1;
	for (i = 0; i < hub_nports; i++) {
		struct hub_port *p = &hub_ports[i];

		p->fd = -1;
		p->tx = malloc(HUB_TX_BUF);
		if (!p->tx || hub_listen(p)) {
			perror("vm-hub: listen on 127.0.0.1");
			return 1;
		}
		if (mtus) {
			p->mtu = (unsigned int)strtoul(mtus, (char **)&mtus, 10);
			if (*mtus == ',')
				mtus++;
		}
	}
	if (fifo) {
		cmd_fd = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		if (cmd_fd < 0) {
			perror(fifo);
			return 1;
		}
	}
	f = fopen(portfile, "w");
	if (!f) {
		perror(portfile);
		return 1;
	}
	for (i = 0; i < hub_nports; i++)
		fprintf(f, "%u\n", hub_ports[i].lport);
	if (fclose(f)) {
		perror(portfile);
		return 1;
	}
	t0 = hub_now();
	while (!hub_stop) {
		int nfd = 0, open_ports = 0, seen = 0, map[2 * HUB_MAX_PORTS];

		if (getppid() != parent)
			break;
		if (hub_now() - t0 > life_s) {
			fprintf(stderr, "vm-hub: lifetime of %.0f s over\n",
				life_s);
			break;
		}
		for (i = 0; i < hub_nports; i++) {
			struct hub_port *p = &hub_ports[i];

			seen += p->seen;
			if (p->fd >= 0) {
				open_ports++;
				pfd[nfd].fd = p->fd;
				pfd[nfd].events = (p->paused ? 0 : POLLIN) |
						  (p->tx_len ? POLLOUT : 0);
				map[nfd++] = i;
			} else if (!p->seen) {
				pfd[nfd].fd = p->lfd;
				pfd[nfd].events = POLLIN;
				map[nfd++] = HUB_MAX_PORTS + i;
			}
		}
		if (seen && !open_ports) {
			fprintf(stderr, "vm-hub: every VM has gone\n");
			break;
		}
		if (!seen && hub_now() - t0 > connect_s) {
			fprintf(stderr, "vm-hub: no VM connected within %.0f s\n",
				connect_s);
			break;
		}
		if (cmd_fd >= 0) {
			pfd[nfd].fd = cmd_fd;
			pfd[nfd].events = POLLIN;
			map[nfd++] = -1;
		}
		if (poll(pfd, (nfds_t)nfd, 1000) < 0) {
			if (errno == EINTR)
				continue;
			perror("vm-hub: poll");
			break;
		}
		for (i = 0; i < nfd; i++) {
			int m = map[i];

			if (!pfd[i].revents)
				continue;
			if (m < 0) {
				hub_command(cmd_fd);
			} else if (m >= HUB_MAX_PORTS) {
				struct hub_port *p = &hub_ports[m -
							HUB_MAX_PORTS];
				int one = 1;

				p->fd = accept4(p->lfd, NULL, NULL,
						SOCK_CLOEXEC);
				if (p->fd < 0)
					continue;
				setsockopt(p->fd, IPPROTO_TCP, TCP_NODELAY,
					   &one, sizeof(one));
				p->seen = 1;
				close(p->lfd);	/* one VM per port */
				p->lfd = -1;
				fprintf(stderr, "vm-hub: port %d connected\n",
					m - HUB_MAX_PORTS);
			} else {
				struct hub_port *p = &hub_ports[m];

				if (pfd[i].revents & POLLOUT)
					hub_flush(p);
				if (p->fd >= 0 && p->paused &&
				    pfd[i].revents & (POLLHUP | POLLERR))
					hub_close_port(p, "the VM is gone");
				if (p->fd >= 0 &&
				    pfd[i].revents & (POLLIN | POLLHUP |
						      POLLERR))
					hub_read(m);
			}
		}
		/* queues drained: senders that waited for room go on */
		for (i = 0; i < hub_nports; i++)
			if (hub_ports[i].fd >= 0 && hub_ports[i].paused)
				hub_drain_rx(i);
	}
	hub_stats();
	return 0;
}
