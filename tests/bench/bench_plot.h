// fusednorm-bench --plot FILE: the cases' JSON lines also go to a temporary file, which
// python/fusednorm/plot.py (matplotlib) draws into FILE once the run is over. The drawing is the
// script's (one copy, also usable on saved --json output and from the Python package); the bench
// only runs `python3 SCRIPT`, python3 from PATH. The script is the one of the source tree this
// bench was built from (FUSEDNORM_PLOT_SCRIPT, set by CMake), or the environment variable
// FUSEDNORM_PLOT_SCRIPT where set. Included by fusednorm_bench.cc only.
#pragma once

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#ifndef FUSEDNORM_PLOT_SCRIPT
#define FUSEDNORM_PLOT_SCRIPT "python/fusednorm/plot.py"
#endif

extern char** environ;

namespace fusednorm {
namespace bench {

// Runs args (args[0] looked up on PATH) with this process's stdout and stderr and waits: its exit
// status (128 + the signal if one ended it), or -1 with *err set when it could not be started.
inline int run_command(const std::vector<std::string>& args, std::string* err) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  fflush(stdout);  // the child writes to the same streams: what came before stays before
  fflush(stderr);
  pid_t pid = 0;
  const int e = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (e != 0) {
    *err = args[0] + ": " + strerror(e);
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      *err = std::string("waitpid: ") + strerror(errno);
      return -1;
    }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

class Plot {
 public:
  Plot() = default;
  Plot(const Plot&) = delete;
  Plot& operator=(const Plot&) = delete;
  ~Plot() {
    if (json_) fclose(json_);
    if (!json_path_.empty()) unlink(json_path_.c_str());
  }

  // Before the run: finds the script, has it check that python3 can draw (matplotlib imports;
  // else it says how to install it), so a long run does not end without its plot, and opens the
  // temporary JSON file. False, with *err, where any of that fails.
  bool open(const std::string& out, std::string* err) {
    out_ = out;
    const char* env = getenv("FUSEDNORM_PLOT_SCRIPT");
    script_ = env && *env ? env : FUSEDNORM_PLOT_SCRIPT;
    if (access(script_.c_str(), R_OK) != 0) {
      *err = "--plot: no plot script at " + script_ + " (" + strerror(errno) +
             "); set FUSEDNORM_PLOT_SCRIPT to python/fusednorm/plot.py of a fusednorm checkout";
      return false;
    }
    const int rc = run_command({"python3", script_, "--check"}, err);
    if (rc < 0) {
      *err = "--plot runs python3 from PATH: " + *err;
      return false;
    }
    if (rc != 0) {
      *err = "--plot: python3 " + script_ + " --check failed (exit status " + std::to_string(rc) + ", its message above)";
      return false;
    }
    const char* tmp = getenv("TMPDIR");
    std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/fusednorm-bench-XXXXXX.json";
    const int fd = mkstemps(&path[0], 5);
    if (fd < 0 || !(json_ = fdopen(fd, "w"))) {
      *err = "--plot: a temporary file " + path + ": " + strerror(errno);
      if (fd >= 0) close(fd);
      return false;
    }
    json_path_ = path;
    return true;
  }
  FILE* json() const { return json_; }

  // After the run: the script draws the JSON lines into the output file.
  bool draw(std::string* err) {
    fclose(json_);
    json_ = nullptr;
    const int rc = run_command({"python3", script_, json_path_, "-o", out_}, err);
    if (rc == 0) return true;
    if (rc > 0) *err = "python3 " + script_ + " failed (exit status " + std::to_string(rc) + ", its message above)";
    *err = "--plot " + out_ + ": " + *err;
    return false;
  }

 private:
  std::string out_, script_, json_path_;
  FILE* json_ = nullptr;
};

}  // namespace bench
}  // namespace fusednorm
