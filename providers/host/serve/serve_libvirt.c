/* SPDX-License-Identifier: MIT */
/*
 * The hypervisor interface (serve.h, struct hv_ops) on a libvirt connection.
 *
 * virtio-mem (<memory model='virtio-mem'>, libvirt >= 7.9): plug and unplug
 *   set the device's <requested> with virDomainUpdateDeviceFlags(LIVE) and
 *   the device's own XML with the new value; the device follows on its own
 *   and MEMORY_DEVICE_SIZE_CHANGE events (coalesced, about 1 s apart) report
 *   <current>.  query reads <current>, <requested>, <size>, <block> from the
 *   live XML.
 * DIMM (<memory model='dimm'>, <maxMemory slots>): plug attaches one DIMM of
 *   the policy's dimm_size with a user alias ("ua-" + the grant's id), reads
 *   its base address back (the grant asks for exactly its range); unplug
 *   detaches it by alias (asynchronous: DEVICE_REMOVED or
 *   DEVICE_REMOVAL_FAILED tell the outcome; until then query says busy).
 * standby (s390): the hypervisor configured the memory outside libvirt;
 *   query says always_plugged with max = the policy's standby size.
 * Needs only a libvirt connection with the domain rights to read the XML,
 * update and attach/detach devices, open channels (docs/autoscaling.md lists
 * the ACL permissions for polkit).
 */
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>
#include <stdio.h>
#include <string.h>

#include "lib/util.h"
#include "providers/host/serve/serve.h"
#include "providers/host/serve/serve_libvirt.h"

struct pending_detach {
	char dom[SERVE_NAME_MAX];
	char alias[64];
};

struct hvl {
	virConnectPtr conn;
	struct pending_detach pend[64];
	size_t n_pend;
};

static const char *lv_error(void)
{
	virErrorPtr e = virGetLastError();
	return e && e->message ? e->message : "unknown libvirt error";
}

int hvl_new(virConnectPtr conn, struct hvl **out)
{
	struct hvl *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->conn = conn;
	*out = h;
	return 0;
}

void hvl_free(struct hvl *h)
{
	free(h);
}

void hvl_detach_done(struct hvl *h, const char *dom, const char *alias)
{
	for (size_t i = 0; i < h->n_pend; i++)
		if (streq(h->pend[i].dom, dom) && streq(h->pend[i].alias, alias)) {
			h->pend[i] = h->pend[--h->n_pend];
			return;
		}
}

static bool detach_pending(const struct hvl *h, const char *dom)
{
	for (size_t i = 0; i < h->n_pend; i++)
		if (streq(h->pend[i].dom, dom))
			return true;
	return false;
}

/* ---- the live XML ------------------------------------------------------------------- */

struct domxml {
	virDomainPtr dom;
	xmlDocPtr doc;
	xmlXPathContextPtr xp;
};

static void domxml_done(struct domxml *x)
{
	if (x->xp)
		xmlXPathFreeContext(x->xp);
	if (x->doc)
		xmlFreeDoc(x->doc);
	if (x->dom)
		virDomainFree(x->dom);
	*x = (struct domxml){ 0 };
}

static int domxml_load(struct hvl *h, const char *name, struct domxml *x, char *why, size_t len)
{
	char *xml;

	*x = (struct domxml){ 0 };
	x->dom = virDomainLookupByName(h->conn, name);
	if (!x->dom) {
		snprintf(why, len, "no domain '%s': %s", name, lv_error());
		return -ENOENT;
	}
	xml = virDomainGetXMLDesc(x->dom, 0);
	if (!xml) {
		snprintf(why, len, "cannot read the XML of '%s': %s", name, lv_error());
		domxml_done(x);
		return -EIO;
	}
	x->doc = xmlReadMemory(xml, (int)strlen(xml), "domain.xml", NULL, XML_PARSE_NONET | XML_PARSE_NOERROR |
										XML_PARSE_NOWARNING);
	free(xml);
	x->xp = x->doc ? xmlXPathNewContext(x->doc) : NULL;
	if (!x->xp) {
		snprintf(why, len, "cannot parse the XML of '%s'", name);
		domxml_done(x);
		return -EBADMSG;
	}
	return 0;
}

static xmlNodePtr first(struct domxml *x, xmlNodePtr ctx, const char *expr)
{
	xmlXPathObjectPtr r;
	xmlNodePtr n = NULL;

	x->xp->node = ctx ? ctx : xmlDocGetRootElement(x->doc);
	r = xmlXPathEvalExpression((const xmlChar *)expr, x->xp);
	if (r && r->nodesetval && r->nodesetval->nodeNr > 0)
		n = r->nodesetval->nodeTab[0];
	xmlXPathFreeObject(r);
	return n;
}

static size_t all(struct domxml *x, const char *expr, xmlNodePtr *out, size_t cap)
{
	xmlXPathObjectPtr r;
	size_t n = 0;

	x->xp->node = xmlDocGetRootElement(x->doc);
	r = xmlXPathEvalExpression((const xmlChar *)expr, x->xp);
	if (r && r->nodesetval)
		for (int i = 0; i < r->nodesetval->nodeNr && n < cap; i++)
			out[n++] = r->nodesetval->nodeTab[i];
	xmlXPathFreeObject(r);
	return n;
}

/* A size element's value in bytes (unit attribute, default KiB as libvirt writes). */
static uint64_t size_of(xmlNodePtr n)
{
	xmlChar *v, *u;
	uint64_t x, mul = 1024;

	if (!n)
		return 0;
	v = xmlNodeGetContent(n);
	u = xmlGetProp(n, (const xmlChar *)"unit");
	x = v ? strtoull((const char *)v, NULL, 10) : 0;
	if (u) {
		const char *s = (const char *)u;
		if (streq(s, "b") || streq(s, "bytes")) mul = 1;
		else if (streq(s, "KiB") || streq(s, "k")) mul = 1024;
		else if (streq(s, "MiB") || streq(s, "M")) mul = 1024 * 1024;
		else if (streq(s, "GiB") || streq(s, "G")) mul = 1024ull * 1024 * 1024;
	}
	xmlFree(v);
	xmlFree(u);
	return x * mul;
}

static uint64_t attr_u64(xmlNodePtr n, const char *name)
{
	xmlChar *v = n ? xmlGetProp(n, (const xmlChar *)name) : NULL;
	uint64_t x = v ? strtoull((const char *)v, NULL, 0) : 0;
	xmlFree(v);
	return x;
}

/* ---- the operations --------------------------------------------------------------------- */

static enum hv_kind pick(struct domxml *x, const struct serve_policy *p)
{
	if (p->hypervisor != HV_AUTO)
		return p->hypervisor;
	if (first(x, NULL, "/domain/devices/memory[@model='virtio-mem']"))
		return HV_VIRTIO_MEM;
	if (attr_u64(first(x, NULL, "/domain/maxMemory"), "slots") > 0)
		return HV_DIMM;
	if (p->standby)
		return HV_STANDBY;
	return HV_AUTO;
}

static int q_virtio(struct domxml *x, struct hv_mem *m, char *why, size_t len)
{
	xmlNodePtr dev = first(x, NULL, "/domain/devices/memory[@model='virtio-mem']");

	if (!dev) {
		snprintf(why, len, "no <memory model='virtio-mem'> device");
		return -ENODEV;
	}
	m->max = size_of(first(x, dev, "target/size"));
	m->granule = size_of(first(x, dev, "target/block"));
	m->requested = size_of(first(x, dev, "target/requested"));
	m->plugged = size_of(first(x, dev, "target/current"));
	return 0;
}

static int q_dimm(struct hvl *h, struct domxml *x, const char *name, const struct serve_policy *p, struct hv_mem *m)
{
	xmlNodePtr dimms[64];
	size_t n = all(x, "/domain/devices/memory[@model='dimm']", dimms, ARRAY_SIZE(dimms));
	xmlNodePtr maxm = first(x, NULL, "/domain/maxMemory");
	uint64_t slots = attr_u64(maxm, "slots"), cap = size_of(maxm);
	uint64_t boot = size_of(first(x, NULL, "/domain/memory")), used = 0;

	for (size_t i = 0; i < n; i++)
		used += size_of(first(x, dimms[i], "target/size"));
	/* <memory> includes the DIMMs; what may still come is bounded by slots and maxMemory */
	m->plugged = used;
	m->requested = used;
	m->granule = p->dimm_size;
	m->max = used;
	if (slots > n && cap > boot)
		m->max = used + ((slots - n) * p->dimm_size < cap - boot ? (slots - n) * p->dimm_size : cap - boot);
	m->busy = detach_pending(h, name);
	return 0;
}

static int hvl_query(void *impl, const char *name, const struct serve_policy *p, struct hv_mem *m, char *why,
		     size_t len)
{
	struct hvl *h = impl;
	struct domxml x;
	int r;

	*m = (struct hv_mem){ 0 };
	r = domxml_load(h, name, &x, why, len);
	if (r < 0)
		return r;
	m->kind = pick(&x, p);
	switch (m->kind) {
	case HV_VIRTIO_MEM:
		r = q_virtio(&x, m, why, len);
		break;
	case HV_DIMM:
		r = q_dimm(h, &x, name, p, m);
		break;
	case HV_STANDBY:
		m->always_plugged = true;
		m->max = p->standby;
		m->granule = 1;
		break;
	default:
		snprintf(why, len, "no virtio-mem device, no DIMM slots (<maxMemory slots>), no standby size in the policy");
		r = -ENODEV;
	}
	domxml_done(&x);
	return r;
}

static int set_requested(struct hvl *h, const char *name, int64_t delta, char *why, size_t len)
{
	struct domxml x;
	xmlNodePtr dev, req;
	xmlBufferPtr buf = NULL;
	uint64_t cur, max;
	int64_t want;
	char num[32];
	int r;

	r = domxml_load(h, name, &x, why, len);
	if (r < 0)
		return r;
	dev = first(&x, NULL, "/domain/devices/memory[@model='virtio-mem']");
	req = dev ? first(&x, dev, "target/requested") : NULL;
	if (!req) {
		snprintf(why, len, "no virtio-mem device with <requested>");
		domxml_done(&x);
		return -ENODEV;
	}
	cur = size_of(req);
	max = size_of(first(&x, dev, "target/size"));
	want = (int64_t)cur + delta;
	if (want < 0)
		want = 0;
	if ((uint64_t)want > max)
		want = (int64_t)max;
	snprintf(num, sizeof(num), "%llu", (unsigned long long)want / 1024);
	xmlNodeSetContent(req, (const xmlChar *)num);
	xmlSetProp(req, (const xmlChar *)"unit", (const xmlChar *)"KiB");
	buf = xmlBufferCreate();
	if (!buf || xmlNodeDump(buf, x.doc, dev, 0, 0) < 0) {
		r = -ENOMEM;
	} else if (virDomainUpdateDeviceFlags(x.dom, (const char *)xmlBufferContent(buf), VIR_DOMAIN_AFFECT_LIVE) < 0) {
		snprintf(why, len, "virDomainUpdateDeviceFlags(<requested> %s KiB): %s", num, lv_error());
		r = -EIO;
	}
	if (buf)
		xmlBufferFree(buf);
	domxml_done(&x);
	return r;
}

static int dimm_attach(struct hvl *h, const char *name, uint64_t bytes, struct hv_range *out, char *why, size_t len)
{
	char xml[512], expr[160];
	struct domxml x;
	xmlNodePtr dev;
	virDomainPtr dom = virDomainLookupByName(h->conn, name);
	int r;

	if (!dom) {
		snprintf(why, len, "no domain '%s': %s", name, lv_error());
		return -ENOENT;
	}
	snprintf(xml, sizeof(xml),
		 "<memory model='dimm'><target><size unit='KiB'>%llu</size><node>0</node></target>"
		 "<alias name='%s'/></memory>", (unsigned long long)bytes / 1024, out->alias);
	r = virDomainAttachDeviceFlags(dom, xml, VIR_DOMAIN_AFFECT_LIVE);
	virDomainFree(dom);
	if (r < 0) {
		snprintf(why, len, "attach of a %llu KiB DIMM: %s", (unsigned long long)bytes / 1024, lv_error());
		return -EIO;
	}
	r = domxml_load(h, name, &x, why, len);
	if (r < 0)
		return r;
	snprintf(expr, sizeof(expr), "/domain/devices/memory[@model='dimm'][alias/@name='%s']/address", out->alias);
	dev = first(&x, NULL, expr);
	out->start = attr_u64(dev, "base");
	out->size = bytes;
	domxml_done(&x);
	if (!out->start) {
		snprintf(why, len, "DIMM %s attached, but its base address is not in the live XML", out->alias);
		return -EIO;
	}
	return 0;
}

static int hvl_plug(void *impl, const char *name, const struct serve_policy *p, uint64_t bytes, struct hv_range *out,
		    char *why, size_t len)
{
	struct hvl *h = impl;
	struct hv_mem m;
	int r = hvl_query(impl, name, p, &m, why, len);

	if (r < 0)
		return r;
	if (m.kind == HV_STANDBY)
		return 0;
	if (m.kind == HV_DIMM) {
		if (!out || !out->alias[0]) {
			snprintf(why, len, "a DIMM plug needs an alias");
			return -EINVAL;
		}
		return dimm_attach(h, name, bytes, out, why, len);
	}
	return set_requested(h, name, (int64_t)bytes, why, len);
}

static int hvl_unplug(void *impl, const char *name, const struct serve_policy *p, uint64_t bytes,
		      const struct hv_range *range, char *why, size_t len)
{
	struct hvl *h = impl;
	struct hv_mem m;
	virDomainPtr dom;
	int r = hvl_query(impl, name, p, &m, why, len);

	if (r < 0)
		return r;
	if (m.kind == HV_STANDBY)
		return 0;
	if (m.kind != HV_DIMM)
		return set_requested(h, name, -(int64_t)bytes, why, len);
	if (!range) {
		snprintf(why, len, "a DIMM unplug needs the DIMM");
		return -EINVAL;
	}
	dom = virDomainLookupByName(h->conn, name);
	if (!dom) {
		snprintf(why, len, "no domain '%s': %s", name, lv_error());
		return -ENOENT;
	}
	r = virDomainDetachDeviceAlias(dom, range->alias, VIR_DOMAIN_AFFECT_LIVE);
	virDomainFree(dom);
	if (r < 0) {
		snprintf(why, len, "detach of %s: %s", range->alias, lv_error());
		return -EIO;
	}
	if (h->n_pend < ARRAY_SIZE(h->pend)) {
		snprintf(h->pend[h->n_pend].dom, sizeof(h->pend[0].dom), "%s", name);
		snprintf(h->pend[h->n_pend].alias, sizeof(h->pend[0].alias), "%s", range->alias);
		h->n_pend++;
	}
	return 0;
}

static int hvl_host_free(void *impl, uint64_t *out)
{
	struct hvl *h = impl;
	int n = 0;
	virNodeMemoryStatsPtr st;
	uint64_t free_kb = 0;

	if (virNodeGetMemoryStats(h->conn, VIR_NODE_MEMORY_STATS_ALL_CELLS, NULL, &n, 0) < 0 || n <= 0)
		return -EIO;
	st = calloc((size_t)n, sizeof(*st));
	if (!st)
		return -ENOMEM;
	if (virNodeGetMemoryStats(h->conn, VIR_NODE_MEMORY_STATS_ALL_CELLS, st, &n, 0) < 0) {
		free(st);
		return -EIO;
	}
	/* free plus what the kernel gives back on demand (page cache, buffers) */
	for (int i = 0; i < n; i++)
		if (streq(st[i].field, VIR_NODE_MEMORY_STATS_FREE) || streq(st[i].field, VIR_NODE_MEMORY_STATS_BUFFERS) ||
		    streq(st[i].field, VIR_NODE_MEMORY_STATS_CACHED))
			free_kb += st[i].value;
	free(st);
	*out = free_kb * 1024;
	return 0;
}

const struct hv_ops hvl_ops = {
	.name = "libvirt",
	.query = hvl_query,
	.plug = hvl_plug,
	.unplug = hvl_unplug,
	.host_free = hvl_host_free,
};
