// Variable helper functions (TensorFlow's "Variable helper functions"):
// collection accessors and the initialization lifecycle, on the thread's
// default graph.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "varstate/graph.h"
#include "varstate/session.h"
#include "varstate/variable.h"

namespace varstate {

// Adds `item` to the default graph's collection `key` (tf.add_to_collection).
void add_to_collection(const std::string& key, std::any item);
// The default graph's collection `key` (tf.get_collection(key, scope)).
// With a non-empty `scope`, only the items whose name matches the regular
// expression `scope` (ECMAScript) at its start, as Python's
// re.match(scope, item.name): "enc" keeps "enc/w:0" and "encoder/w:0",
// "enc/" only the first. Named items are Variables ("s/w:0"),
// PartitionedVariables ("s/emb"), Ops ("s/init") and Placeholders
// ("s/x:0"); any other item is left out when a scope is given. Throws
// ValueError naming `scope` when it is not a valid regular expression. An
// empty scope keeps every item (TensorFlow's scope=None).
std::vector<std::any> get_collection(const std::string& key, std::string_view scope = {});
// The Variables of get_collection(key, scope), other items left out.
std::vector<Variable> get_collection_variables(const std::string& key, std::string_view scope = {});

// The variables of a standard collection, filtered by `scope` as
// get_collection (tf.global_variables(scope), ...; same errors).
std::vector<Variable> global_variables(std::string_view scope = {});
std::vector<Variable> all_variables();  // = global_variables()
std::vector<Variable> trainable_variables(std::string_view scope = {});
std::vector<Variable> local_variables(std::string_view scope = {});
std::vector<Variable> model_variables(std::string_view scope = {});
std::vector<Variable> moving_average_variables(std::string_view scope = {});

// An Op that runs the initializers of `var_list` (in list order; an
// initial value built from another variable's initialized_value() was
// already computed from that variable's initial value, so the order does not
// change the result). An empty list gives a runnable no-op.
Op initialize_variables(const std::vector<Variable>& var_list, const std::string& name = "init");
Op variables_initializer(const std::vector<Variable>& var_list, const std::string& name = "init");
Op global_variables_initializer();
Op initialize_all_variables();  // = global_variables_initializer()
Op local_variables_initializer();
Op initialize_local_variables();  // = local_variables_initializer()

// An Op that runs every Op of the default graph's TABLE_INITIALIZERS
// collection, in collection order (tf.tables_initializer,
// tf.initialize_all_tables); with none, a runnable no-op. A program's own
// lookup tables add their initializer Ops to that collection. Items of the
// collection that are not Ops raise TypeError naming the collection.
Op tables_initializer(const std::string& name = "init_all_tables");
Op initialize_all_tables(const std::string& name = "init_all_tables");  // = tables_initializer()

bool is_variable_initialized(const Variable& variable);
// A 1-D string tensor with the names (op names) of the uninitialized
// variables of var_list (default: global + local variables).
Tensor report_uninitialized_variables(const std::vector<Variable>& var_list);
Tensor report_uninitialized_variables();
// An Op that, when run, raises FailedPreconditionError naming the
// uninitialized variables of var_list (default: global + local variables).
Op assert_variables_initialized(const std::vector<Variable>& var_list);
Op assert_variables_initialized();

}  // namespace varstate
