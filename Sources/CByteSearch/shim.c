// CByteSearch is header-only (static inline); SwiftPM builds a C target only from at least one source file.
#include "CByteSearch.h"
