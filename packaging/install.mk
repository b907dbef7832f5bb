# Service files and shell completion, installed by `make install-service`.
# Included by the top Makefile.  Directories come from pkg-config (systemd,
# bash-completion) when it knows them; override any of them on the command
# line, e.g. `make install SYSTEMDUNITDIR=/usr/lib/systemd/system`.
#
# The unit expects the paths the packages use (./configure --prefix=/usr
# --sysconfdir=/etc --localstatedir=/var --runstatedir=/run): its sandbox opens
# /var/lib/memgrant and /run/memgrant for writing and nothing else.

PKG_CONFIG ?= pkg-config
pc_var = $(shell $(PKG_CONFIG) --variable=$(1) $(2) 2>/dev/null)

SYSTEMDUNITDIR ?= $(or $(call pc_var,systemdsystemunitdir,systemd),/usr/lib/systemd/system)
SYSUSERSDIR ?= $(or $(call pc_var,sysusersdir,systemd),/usr/lib/sysusers.d)
TMPFILESDIR ?= $(or $(call pc_var,tmpfilesdir,systemd),/usr/lib/tmpfiles.d)
UDEVRULESDIR ?= $(or $(call pc_var,udevdir,udev),/usr/lib/udev)/rules.d
BASHCOMPDIR ?= $(or $(call pc_var,completionsdir,bash-completion),$(DATADIR)/bash-completion/completions)

DOCDIR ?= $(DATADIR)/doc/memgrant
# the documents the shipped files name (memgrant.yaml: docs/config.md; the
# manual pages: docs/security.md, docs/protocol.md) and the operator's guide
DOCS := docs/config.md docs/security.md docs/operations.md docs/protocol.md

.PHONY: install-service install-doc

install-doc:
	install -d $(DESTDIR)$(DOCDIR)
	install -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/

install-service:
	$(if $(filter-out /var,$(LOCALSTATEDIR))$(filter-out /run,$(RUNSTATEDIR)),@echo "install-service: warning: memgrantd.service assumes --localstatedir=/var --runstatedir=/run (configured: $(LOCALSTATEDIR), $(RUNSTATEDIR))" >&2)
	install -d $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(BASHCOMPDIR)
	install -d $(DESTDIR)$(UDEVRULESDIR)
	sed 's|/usr/sbin/memgrantd|$(SBINDIR)/memgrantd|g' packaging/systemd/memgrantd.service > $(DESTDIR)$(SYSTEMDUNITDIR)/memgrantd.service
	chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/memgrantd.service
	install -m 0644 packaging/systemd/memgrant.sysusers $(DESTDIR)$(SYSUSERSDIR)/memgrant.conf
	install -m 0644 packaging/systemd/memgrant.tmpfiles $(DESTDIR)$(TMPFILESDIR)/memgrant.conf
	install -m 0644 packaging/udev/60-memgrant.rules $(DESTDIR)$(UDEVRULESDIR)/60-memgrant.rules
	install -m 0644 packaging/bash-completion/memgrantctl $(DESTDIR)$(BASHCOMPDIR)/memgrantctl
	install -m 0644 packaging/bash-completion/memgrantd $(DESTDIR)$(BASHCOMPDIR)/memgrantd
	$(if $(filter 1,$(HAVE_LIBVIRT)),install -m 0644 packaging/bash-completion/memgrant-host $(DESTDIR)$(BASHCOMPDIR)/memgrant-host)
	$(if $(filter 1,$(HAVE_LIBVIRT)),sed 's|/usr/bin/memgrant-host|$(BINDIR)/memgrant-host|g' packaging/systemd/memgrant-host.service > $(DESTDIR)$(SYSTEMDUNITDIR)/memgrant-host.service && chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/memgrant-host.service)
	$(if $(filter 1,$(HAVE_LIBVIRT)),install -m 0644 packaging/systemd/memgrant-host.sysusers $(DESTDIR)$(SYSUSERSDIR)/memgrant-host.conf)
	$(if $(filter 1,$(HAVE_LIBVIRT)),install -D -m 0644 packaging/memgrant-host.yaml $(DESTDIR)$(SYSCONFDIR)/memgrant/memgrant-host.yaml)
