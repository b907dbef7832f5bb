/* SPDX-License-Identifier: MIT */
/*
 * Bytes to and from the guest agent: a Unix socket, or a libvirt stream.
 *
 * The libvirt stream is non-blocking and driven by libvirt's default event
 * loop (virEventRegisterDefaultImpl() before the connection is opened): a
 * read or write that would block registers interest in the stream and runs
 * virEventRunDefaultImpl() until the stream is ready or a timer for the
 * deadline fires.
 */
#include <fcntl.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <libxml/parser.h>
#include <libxml/xpath.h>
#include <poll.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "lib/timeutil.h"
#include "lib/util.h"
#include "providers/host/host.h"

struct host_transport {
	int fd;                   /* socket; -1 for libvirt */
	virConnectPtr conn;
	virDomainPtr dom;
	virStreamPtr st;
	bool cb_added;
	int events;               /* what the stream reported */
	bool timed_out;
};

static int remaining_ms(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - ((int64_t)mono_ms());
	return left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

static void why_set(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_set(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!why || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

const char *host_channel_xml_snippet(void)
{
	return "<channel type='unix'>\n"
	       "  <source mode='bind'/>\n"
	       "  <target type='virtio' name='" HOST_CHANNEL_NAME "'/>\n"
	       "</channel>";
}

/* ---- Unix socket -------------------------------------------------------------- */

int transport_open_socket(const char *path, struct host_transport **out, char *why, size_t why_len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_close_ int fd = -1;
	struct host_transport *t;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		why_set(why, why_len, "%s: path too long for a Unix socket", path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		why_set(why, why_len, "socket: %s", strerror(errno));
		return -errno;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		why_set(why, why_len, "cannot connect to %s: %s", path, strerror(e));
		return -e;
	}
	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
		why_set(why, why_len, "%s: %s", path, strerror(errno));
		return -errno;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->fd = TAKE_FD(fd);
	*out = t;
	return 0;
}

static int sock_wait(struct host_transport *t, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd pf = { .fd = t->fd, .events = events };
		int n = poll(&pf, 1, remaining_ms(deadline));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ETIMEDOUT;
		return 0;
	}
}

/* ---- libvirt -------------------------------------------------------------------- */

static void quiet_errors(void *data, virErrorPtr err)
{
	/* libvirt prints every error to stderr by default; the caller reports them */
	(void)data;
	(void)err;
}

static void xml_quiet(void *ctx, const char *fmt, ...)
{
	/* libxml2 (used by libvirt's test driver too) prints parse warnings itself */
	(void)ctx;
	(void)fmt;
}

static const char *last_error(void)
{
	virErrorPtr e = virGetLastError();
	return e && e->message ? e->message : "unknown libvirt error";
}

static void stream_cb(virStreamPtr st, int events, void *opaque)
{
	struct host_transport *t = opaque;
	(void)st;
	t->events |= events;
}

static void timeout_cb(int timer, void *opaque)
{
	struct host_transport *t = opaque;
	(void)timer;
	t->timed_out = true;
}

/* Runs the event loop until the stream reports one of WANT, or DEADLINE. */
static int stream_wait(struct host_transport *t, int want, int64_t deadline)
{
	int timer = -1, r = 0;

	t->events = 0;
	t->timed_out = false;
	if (virStreamEventUpdateCallback(t->st, want | VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP) < 0)
		return -EIO;
	if (deadline >= 0) {
		timer = virEventAddTimeout(remaining_ms(deadline), timeout_cb, t, NULL);
		if (timer < 0)
			return -EIO;
	}
	while (!t->events && !t->timed_out) {
		if (virEventRunDefaultImpl() < 0) {
			r = -EIO;
			break;
		}
	}
	if (timer >= 0)
		virEventRemoveTimeout(timer);
	if (r == 0 && !t->events)
		r = -ETIMEDOUT;
	return r;
}

/* The first node XPATH selects in the domain XML: 1 found (its text copied to
 * OUT when OUT is not NULL; -ENAMETOOLONG when it does not fit LEN, 0 when
 * it is empty), 0 none, -EBADMSG not XML, -ENOMEM. */
static int xml_first(const char *xml, const char *xpath, char *out, size_t len)
{
	xmlDocPtr doc;
	xmlXPathContextPtr ctx;
	xmlXPathObjectPtr res;
	int r = 0;

	doc = xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL, XML_PARSE_NONET | XML_PARSE_NOERROR |
							       XML_PARSE_NOWARNING);
	if (!doc)
		return -EBADMSG;
	ctx = xmlXPathNewContext(doc);
	if (!ctx) {
		xmlFreeDoc(doc);
		return -ENOMEM;
	}
	res = xmlXPathEvalExpression((const xmlChar *)xpath, ctx);
	if (res && res->nodesetval && res->nodesetval->nodeNr > 0) {
		if (!out) {
			r = 1;
		} else {
			xmlChar *v = xmlNodeGetContent(res->nodesetval->nodeTab[0]);
			if (v && *v) {
				r = strlen((const char *)v) < len ? 1 : -ENAMETOOLONG;
				if (r == 1)
					snprintf(out, len, "%s", (const char *)v);
			}
			xmlFree(v);
		}
	}
	xmlXPathFreeObject(res);
	xmlXPathFreeContext(ctx);
	xmlFreeDoc(doc);
	return r;
}

/* The channel named HOST_CHANNEL_NAME in the domain's XML? 1 yes, 0 no, -errno. */
int host_xml_has_channel(const char *xml)
{
	return xml_first(xml, "/domain/devices/channel/target[@type='virtio' and @name='" HOST_CHANNEL_NAME "']",
			 NULL, 0);
}

int host_xml_channel_path(const char *xml, char *out, size_t len)
{
	return xml_first(xml,
			 "/domain/devices/channel[@type='unix'][target[@type='virtio' and @name='" HOST_CHANNEL_NAME
			 "']]/source[@mode='bind']/@path",
			 out, len);
}

int transport_open_libvirt(const char *uri, const char *domain, struct host_transport **out, char *why,
			   size_t why_len)
{
	struct host_transport *t;
	char *xml;
	int r, active;

	virSetErrorFunc(NULL, quiet_errors);
	xmlSetGenericErrorFunc(NULL, xml_quiet);
	if (virEventRegisterDefaultImpl() < 0) {
		why_set(why, why_len, "cannot start libvirt's event loop: %s", last_error());
		return -EIO;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->fd = -1;
	t->conn = virConnectOpen(uri);
	if (!t->conn) {
		why_set(why, why_len, "cannot connect to %s: %s", uri ? uri : "libvirt's default URI", last_error());
		r = -ECONNREFUSED;
		goto fail;
	}
	t->dom = virDomainLookupByName(t->conn, domain);
	if (!t->dom) {
		virErrorPtr e = virGetLastError();
		if (e && e->code == VIR_ERR_NO_DOMAIN) {
			char *u = virConnectGetURI(t->conn);
			why_set(why, why_len, "no domain named '%s' on %s", domain, u ? u : "this connection");
			free(u);
			r = -ENOENT;
		} else {
			why_set(why, why_len, "cannot look up domain '%s': %s", domain, last_error());
			r = -EIO;
		}
		goto fail;
	}
	active = virDomainIsActive(t->dom);
	if (active < 0) {
		why_set(why, why_len, "domain '%s': %s", domain, last_error());
		r = -EIO;
		goto fail;
	}
	if (active == 0) {
		why_set(why, why_len, "domain '%s' is not running (start it, e.g. virsh start %s)", domain, domain);
		r = -ESRCH;
		goto fail;
	}
	xml = virDomainGetXMLDesc(t->dom, 0);
	if (!xml) {
		why_set(why, why_len, "cannot read the XML of domain '%s': %s", domain, last_error());
		r = -EIO;
		goto fail;
	}
	r = host_xml_has_channel(xml);
	free(xml);
	if (r < 0) {
		why_set(why, why_len, "cannot parse the XML of domain '%s'", domain);
		r = -EIO;
		goto fail;
	}
	if (r == 0) {
		why_set(why, why_len,
			"domain '%s' has no channel %s; add this to <devices> (virsh edit %s), then restart the domain:\n%s",
			domain, HOST_CHANNEL_NAME, domain, host_channel_xml_snippet());
		r = -ENODEV;
		goto fail;
	}
	t->st = virStreamNew(t->conn, VIR_STREAM_NONBLOCK);
	if (!t->st) {
		why_set(why, why_len, "virStreamNew: %s", last_error());
		r = -EIO;
		goto fail;
	}
	if (virDomainOpenChannel(t->dom, HOST_CHANNEL_NAME, t->st, 0) < 0) {
		virErrorPtr e = virGetLastError();
		r = e && e->code == VIR_ERR_NO_SUPPORT ? -EOPNOTSUPP : -EIO;
		why_set(why, why_len, "cannot open channel %s of domain '%s': %s", HOST_CHANNEL_NAME, domain,
			last_error());
		goto fail;
	}
	if (virStreamEventAddCallback(t->st, VIR_STREAM_EVENT_READABLE, stream_cb, t, NULL) < 0) {
		why_set(why, why_len, "cannot watch the channel stream: %s", last_error());
		r = -EIO;
		goto fail;
	}
	t->cb_added = true;
	*out = t;
	return 0;
fail:
	transport_close(t);
	return r;
}

/* ---- both ------------------------------------------------------------------------ */

int transport_send(struct host_transport *t, const char *buf, size_t len, int64_t deadline)
{
	while (len > 0) {
		ssize_t n;
		int r;

		if (t->fd >= 0) {
			n = send(t->fd, buf, len, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno != EAGAIN)
				return -errno;
			if (n < 0) {
				r = sock_wait(t, POLLOUT, deadline);
				if (r < 0)
					return r;
				continue;
			}
		} else {
			n = virStreamSend(t->st, buf, len);
			if (n == -2) {
				r = stream_wait(t, VIR_STREAM_EVENT_WRITABLE, deadline);
				if (r < 0)
					return r;
				if (t->events & (VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP))
					return -EPIPE;
				continue;
			}
			if (n < 0)
				return -EPIPE;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

ssize_t transport_recv(struct host_transport *t, char *buf, size_t cap, int64_t deadline)
{
	for (;;) {
		ssize_t n;
		int r;

		if (t->fd >= 0) {
			n = read(t->fd, buf, cap);
			if (n >= 0)
				return n;
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return -errno;
			r = sock_wait(t, POLLIN, deadline);
			if (r < 0)
				return r;
		} else {
			n = virStreamRecv(t->st, buf, cap);
			if (n >= 0)
				return n;
			if (n != -2)
				return -EPIPE;
			r = stream_wait(t, VIR_STREAM_EVENT_READABLE, deadline);
			if (r < 0)
				return r;
		}
	}
}

void transport_close(struct host_transport *t)
{
	if (!t)
		return;
	if (t->fd >= 0)
		close(t->fd);
	if (t->st) {
		if (t->cb_added)
			virStreamEventRemoveCallback(t->st);
		virStreamAbort(t->st);
		virStreamFree(t->st);
	}
	if (t->dom)
		virDomainFree(t->dom);
	if (t->conn)
		virConnectClose(t->conn);
	free(t);
}
