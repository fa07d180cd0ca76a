#include "CSystem.h"
