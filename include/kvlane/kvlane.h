// Umbrella header: the whole public API.
#pragma once

#include "kvlane/agent.h"
#include "kvlane/descriptor.h"
#include "kvlane/memory.h"
#include "kvlane/options.h"
#include "kvlane/provenance.h"
#include "kvlane/status.h"
#include "kvlane/transfer.h"
