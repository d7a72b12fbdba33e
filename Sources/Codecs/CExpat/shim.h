#ifndef TETHER_CEXPAT_SHIM_H
#define TETHER_CEXPAT_SHIM_H

// expat.h declares the billion-laughs protection setters only when XML_DTD is defined.
#ifndef XML_DTD
#define XML_DTD 1
#endif
#include <expat.h>
#include <dlfcn.h>
#include <string.h>

/// Switches Expat's reparse deferral off on `parser`.
///
/// Expat 2.6 (and Debian 12's patched 2.5.0 packages from deb12u2 on, whose version macros still
/// say 2.5.0) defer reparsing an incomplete token until enough new data arrives, so a tag split
/// across two reads may not be reported until more bytes come. The setter is looked up at run
/// time because it may be missing from the headers, the library, or both.
/// Returns 1 when deferral was switched off, 0 when the call failed, -1 when the library has no
/// reparse deferral at all.
static inline int cexpat_disable_reparse_deferral(XML_Parser parser) {
    typedef XML_Bool (*setter_t)(XML_Parser, XML_Bool);
    setter_t setter = (setter_t)dlsym(RTLD_DEFAULT, "XML_SetReparseDeferralEnabled");
    if (!setter) return -1;
    return setter(parser, XML_FALSE) ? 1 : 0;
}

#endif
