#include "harness/cli/exit_codes.h"

#include <c10/util/Exception.h>

#include <filesystem>
#include <new>
#include <string>

#include "spec/error.h"

namespace shardcheck {
namespace {

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// "cannot create directories" from libstdc++'s "filesystem error: cannot
// create directories: Permission denied [/proc/x]".
std::string Operation(const std::filesystem::filesystem_error& e) {
  std::string what = e.what();
  const std::string prefix = "filesystem error: ";
  if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
  const size_t colon = what.find(": ");
  return colon == std::string::npos ? what : what.substr(0, colon);
}

std::string FilesystemMessage(const std::filesystem::filesystem_error& e) {
  std::string paths = e.path1().string();
  if (!e.path2().empty()) paths += " -> " + e.path2().string();
  return paths + ": " + e.code().message() + " (" + Operation(e) + ")";
}

}  // namespace

int ReportFailure(const std::exception_ptr& failure, std::ostream& err) {
  std::string message;
  int code = 3;
  try {
    std::rethrow_exception(failure);
  } catch (const Error& e) {
    message = e.what();
    code = ExitCodeFor(e.kind());
  } catch (const std::filesystem::filesystem_error& e) {
    message = FilesystemMessage(e);
  } catch (const std::bad_alloc& e) {
    message = std::string("cannot allocate memory (") + e.what() +
              "): are the sizes (--shapes, --steps) too large?";
    code = 2;
  } catch (const c10::Error& e) {
    message = FirstLine(e.what_without_backtrace());
    if (Contains(message, "allocate") || Contains(message, "out of memory")) {
      message = "cannot allocate memory: " + message + " (are the sizes (--shapes) too large?)";
      code = 2;
    }
  } catch (const std::exception& e) {
    message = FirstLine(e.what());
  } catch (...) {
    message = "unknown failure";
  }
  err << "shardcheck: error: " << message << "\n";
  return code;
}

}  // namespace shardcheck
