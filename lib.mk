# headscope as an installable library (included by the Makefile; kept apart to ease merges).
#   build/libheadscope.so.MAJOR.MINOR.PATCH   the shared library (soname libheadscope.so.MAJOR,
#                                             exporting the functions of the public headers)
#   build/headscope.pc, build/man/*.1         generated at build time
#   make install / uninstall                  PREFIX (/usr/local), DESTDIR, LIBDIR, ...
#   make lib-test                             stage install, out-of-tree example, header
#                                             examples, the Python package's tests

HS_VERSION_STR := $(shell sed -n 's/^\#define HS_VERSION "\([0-9.]*\)".*/\1/p' include/headscope/version.h)
HS_MAJOR := $(firstword $(subst ., ,$(HS_VERSION_STR)))
SONAME = libheadscope.so.$(HS_MAJOR)
SHLIB = $(BUILD)/libheadscope.so.$(HS_VERSION_STR)
PCFILE = $(BUILD)/headscope.pc
MAN_CMDS = analyze attn dump tokenize info convert merge patch
MAN_PAGES = $(BUILD)/man/headscope.1 $(MAN_CMDS:%=$(BUILD)/man/headscope-%.1)

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/headscope

# Library objects are compiled -fPIC so one set serves the .a, the .so and the binary.
# Debian's gcc already builds PIE by default, so -fPIC adds no indirection for code, and
# -fno-semantic-interposition keeps calls inside the library direct as they were.
# The stamp makes objects of a build folder made before -fPIC compile again.
$(LIB_OBJ): ALLCFLAGS += -fPIC -fno-semantic-interposition
$(LIB_OBJ): $(BUILD)/pic.txt
$(BUILD)/pic.txt:
	@mkdir -p $(dir $@)
	echo "-fPIC -fno-semantic-interposition" > $@

.PHONY: shared install uninstall lib-test man
all: $(SHLIB) $(PCFILE) $(MAN_PAGES)
shared: $(SHLIB)
man: $(MAN_PAGES)

# The exports: every function a public header declares (each "hs_name(" in
# include/headscope/*.h); the hs_ helpers of src/internal.h, OpenBLAS, cJSON stay local.
$(BUILD)/libheadscope.map: $(wildcard include/headscope/*.h) lib.mk
	@mkdir -p $(dir $@)
	{ echo '{'; echo '  global:'; grep -oh '\bhs_[a-z0-9_]*(' include/headscope/*.h | \
	    tr -d '(' | sort -u | sed 's/.*/    &;/'; echo '  local: *;'; echo '};'; } > $@

# OpenBLAS (OpenMP build) with the same rpath as the binary: PKG_LIBS.
$(SHLIB): $(LIB_OBJ) $(BUILD)/libheadscope.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script,$(BUILD)/libheadscope.map \
	    -Wl,--no-undefined $(LDFLAGS) $(LIB_OBJ) $(PKG_LIBS) -o $@
	ln -sf $(notdir $@) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/libheadscope.so

# The .pc file: the private libraries let `pkg-config --static` link libheadscope.a.
# OpenBLAS's OpenMP build is named by path (its .pc is not on pkg-config's default path).
# prefix is relative to the .pc file's folder (${pcfiledir}, known to pkg-config and
# pkgconf) when LIBDIR lies under PREFIX: a staged or moved copy works through
# PKG_CONFIG_PATH alone.
HS_SPACE := $(subst x, ,x)
PC_UP = $(subst $(HS_SPACE),,$(foreach c,$(subst /, ,$(patsubst $(PREFIX)/%,%,$(LIBDIR))),/..))
PC_PREFIX = $(if $(filter $(PREFIX)/%,$(LIBDIR)),$${pcfiledir}/..$(PC_UP),$(PREFIX))
define write_pc
	printf '%s\n' 'prefix=$(PC_PREFIX)' 'libdir=$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))' \
	    'includedir=$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))' '' \
	    'Name: headscope' \
	    'Description: attention-head analysis of transformer encoders and decoders (Hugging Face folders, GGUF files)' \
	    'Version: $(HS_VERSION_STR)' \
	    'Requires.private: libpng libcjson libutf8proc' \
	    'Cflags: -I$${includedir}' \
	    'Libs: -L$${libdir} -lheadscope' \
	    'Libs.private: -L$(BLAS_DIR) -Wl,-rpath,$(BLAS_DIR) -lopenblas -fopenmp -lm -lpthread'
endef
$(PCFILE): lib.mk include/headscope/version.h
	@mkdir -p $(dir $@)
	$(write_pc) > $@

# Man pages from each command's --help (man/mkman.sh), so they cannot drift from it.
$(BUILD)/man/headscope.1: $(BIN) man/mkman.sh
	@mkdir -p $(dir $@)
	sh man/mkman.sh $(BIN) $(HS_VERSION_STR) "" > $@
$(BUILD)/man/headscope-%.1: $(BIN) man/mkman.sh
	@mkdir -p $(dir $@)
	sh man/mkman.sh $(BIN) $(HS_VERSION_STR) $* > $@

# The docs keep the repository's layout under DOCDIR (README.md, docs/*.md, docs/img/, the
# sample pictures docs/pictures.md shows, fixtures/README.md and the example README.md links), so their links and
# pictures resolve there too (tests/docs_check.py links, run by lib-test).
HS_DOCS = README.md LICENSE CITATION.cff
HS_DOC_PAGES = $(wildcard docs/*.md)
HS_DOC_IMAGES = $(wildcard docs/img/*.png)
HS_DOC_SAMPLES = $(wildcard fixtures/render/sample_*.png)
HS_DOC_FIXTURES = fixtures/README.md
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/headscope \
	    $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DOCDIR)
	install -m 755 $(BIN) $(DESTDIR)$(BINDIR)/headscope
	install -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/
	ln -sf $(notdir $(SHLIB)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libheadscope.so
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/libheadscope.a
	install -m 644 include/headscope.h $(DESTDIR)$(INCLUDEDIR)/headscope.h
	install -m 644 include/headscope/*.h $(DESTDIR)$(INCLUDEDIR)/headscope/
	$(write_pc) > $(DESTDIR)$(LIBDIR)/pkgconfig/headscope.pc
	install -m 644 $(MAN_PAGES) $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(HS_DOCS) $(DESTDIR)$(DOCDIR)/
	install -d $(DESTDIR)$(DOCDIR)/docs/img $(DESTDIR)$(DOCDIR)/fixtures/render $(DESTDIR)$(DOCDIR)/examples
	install -m 644 $(HS_DOC_PAGES) $(DESTDIR)$(DOCDIR)/docs/
	install -m 644 $(HS_DOC_IMAGES) $(DESTDIR)$(DOCDIR)/docs/img/
	install -m 644 $(HS_DOC_SAMPLES) $(DESTDIR)$(DOCDIR)/fixtures/render/
	install -m 644 $(HS_DOC_FIXTURES) $(DESTDIR)$(DOCDIR)/fixtures/
	install -m 644 examples/entropy.c $(DESTDIR)$(DOCDIR)/examples/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/headscope $(DESTDIR)$(LIBDIR)/libheadscope.so.$(HS_VERSION_STR) \
	    $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libheadscope.so \
	    $(DESTDIR)$(LIBDIR)/libheadscope.a $(DESTDIR)$(LIBDIR)/pkgconfig/headscope.pc \
	    $(DESTDIR)$(INCLUDEDIR)/headscope.h
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/headscope/,$(notdir $(wildcard include/headscope/*.h)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN_PAGES)))
	rm -f $(addprefix $(DESTDIR)$(DOCDIR)/,$(HS_DOCS) $(HS_DOC_PAGES) $(HS_DOC_IMAGES) $(HS_DOC_SAMPLES) $(HS_DOC_FIXTURES) examples/entropy.c)
	-rmdir $(DESTDIR)$(DOCDIR)/docs/img $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(DOCDIR)/fixtures/render \
	    $(DESTDIR)$(DOCDIR)/fixtures $(DESTDIR)$(DOCDIR)/examples 2>/dev/null
	-rmdir $(DESTDIR)$(INCLUDEDIR)/headscope $(DESTDIR)$(DOCDIR) 2>/dev/null

# Installs into a temporary stage, builds examples/ against it through pkg-config (shared
# and static), compiles every header's usage example, checks the exports and the man
# pages, and runs the Python package's tests in a venv over the stage.
lib-test: all
	HS_BUILD=$(BUILD) HS_SANITIZE="$(SANITIZE)" CC="$(CC)" bash tests/lib.sh

# make wheel: $(BUILD)/headscope-VERSION-py3-none-PLATFORM.whl, the Python package with the
# shared library inside (debug sections stripped), written by python/build_backend.py with
# Python's standard library alone (no setuptools, no wheel package). make wheel-test (part
# of make test) installs it offline into fresh venvs (tests/wheel.sh).
WHEEL_PYTHON ?= /usr/bin/python3
WHEEL_LIB = $(BUILD)/wheel/$(SONAME)
.PHONY: wheel wheel-test
wheel: $(SHLIB)
	@mkdir -p $(dir $(WHEEL_LIB))
	strip --strip-debug -o $(WHEEL_LIB) $(SHLIB) 2>/dev/null || cp $(SHLIB) $(WHEEL_LIB)
	rm -f $(BUILD)/headscope-*.whl
	$(WHEEL_PYTHON) python/build_backend.py --lib $(WHEEL_LIB) --out $(BUILD)
wheel-test: wheel $(BIN)
	HS_BUILD=$(BUILD) HS_SANITIZE="$(SANITIZE)" CC="$(CC)" HEADSCOPE=$(BIN) bash tests/wheel.sh
