# Manual pages, written in scdoc(5) in docs/man/*.scd.  Included by the top
# Makefile (after B and config.mk are known):
#   make man           build them into $(B)/man/ (needs scdoc)
#   make install-man   install them under $(DESTDIR)$(MANDIR)
# memgrant-host(1) is installed only with the program (HAVE_LIBVIRT=1).

SCDOC ?= scdoc

MAN_SRC := $(wildcard docs/man/*.scd)
MAN_PAGES := $(patsubst docs/man/%.scd,$(B)/man/%,$(MAN_SRC))
MAN_INSTALL := $(filter-out $(if $(filter 1,$(HAVE_LIBVIRT)),,$(B)/man/memgrant-host.1),$(MAN_PAGES))

.PHONY: man install-man

man: $(MAN_PAGES)

$(B)/man/%: docs/man/%.scd
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  SCDOC   $@")
	$(Q)$(SCDOC) < $< > $@.tmp && mv $@.tmp $@

# The section is the page's suffix: memgrantd.8 -> man8/.
install-man: man
	$(foreach p,$(MAN_INSTALL),install -d $(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(p))) && \
		install -m 0644 $(p) $(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(p)))/$(notdir $(p)) &&) true
