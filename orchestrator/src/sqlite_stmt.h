// A prepared SQLite statement with RAII and typed binds; private to the store.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "longhaul/common/status.h"

namespace longhaul::orchestrator {

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) stmt_ = nullptr;
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Status status() const {
    return stmt_ ? Status::Ok() : Internal(std::string("sqlite prepare: ") + sqlite3_errmsg(db_));
  }
  Stmt& Bind(int i, const std::string& v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Text(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& Bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  // SQLITE_ROW -> true, SQLITE_DONE -> false; other codes set *error.
  bool Step(Status* error) {
    if (!stmt_) {
      *error = status();
      return false;
    }
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) {
      const int ext = sqlite3_extended_errcode(db_);
      *error = ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_UNIQUE
                   ? Status(StatusCode::kAlreadyExists, sqlite3_errmsg(db_))
                   : Internal(std::string("sqlite step: ") + sqlite3_errmsg(db_));
    }
    return false;
  }
  Status Run() {
    Status s;
    Step(&s);
    return s;
  }
  std::string Blob(int col) const {
    const void* p = sqlite3_column_blob(stmt_, col);
    const int n = sqlite3_column_bytes(stmt_, col);
    return p ? std::string(static_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
  }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) const { return sqlite3_column_double(stmt_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace longhaul::orchestrator
