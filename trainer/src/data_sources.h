// Constructors of the concrete DataSources, behind MakeDataSource.
#pragma once

#include <memory>

#include "longhaul/trainer/data.h"

namespace longhaul::trainer {

Result<std::unique_ptr<DataSource>> MakeSyntheticSource(const DataOptions& options,
                                                        uint32_t region, uint32_t worker);
Result<std::unique_ptr<DataSource>> MakeTextSource(const DataOptions& options, uint32_t region,
                                                   uint32_t region_count, uint32_t worker,
                                                   uint32_t workers);

}  // namespace longhaul::trainer
