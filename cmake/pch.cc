// Anchor translation unit for the shared precompiled header.
#include "cmake/pch.h"
