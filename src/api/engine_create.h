// The body of every ds_engine_create* function: read the options, build the
// engine, run `setup` on it (ds_engine_create_with_model attaches its model
// there), then register the handle. Throws ds::Error.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "api/handles.h"

namespace ds::api {

ds_engine_t* create_engine(const std::string& json, const ds_engine_options_t* opts,
                           const std::function<void(ds::Engine&)>& setup = nullptr);

// As create_engine, with the engine built by `make` from the parsed options
// and communicator (null: the process's world) instead of the constructor.
using EngineMaker = std::function<std::unique_ptr<ds::Engine>(const ds::EngineOptions&,
                                                              std::shared_ptr<ds::comm::Communicator>)>;
ds_engine_t* create_engine_with(const ds_engine_options_t* opts, const EngineMaker& make);

}  // namespace ds::api
