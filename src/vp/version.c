/* kr_version: the version this library was built as (karui/version.h). */
#include "karui/version.h"

const char *kr_version(void)
{
	return KARUI_VERSION_STRING;
}
