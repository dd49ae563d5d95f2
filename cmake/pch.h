// Precompiled header shared by every shardcheck target.
#pragma once
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <string>
#include <vector>
#include <map>
