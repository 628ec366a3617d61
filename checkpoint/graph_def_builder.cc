#include "checkpoint/graph_def_builder_internal.h"

#include <utility>

#include "checkpoint/proto_convert_internal.h"

namespace varstate {

tf::NodeDef* add_node(tf::GraphDef* graph, const std::string& name, const std::string& op,
                      std::vector<std::string> inputs, const std::string& device) {
  tf::NodeDef* node = graph->add_node();
  node->set_name(name);
  node->set_op(op);
  for (std::string& in : inputs) node->add_input(std::move(in));
  if (!device.empty()) node->set_device(device);
  return node;
}

tf::AttrValue& attr(tf::NodeDef* node, const std::string& key) {
  return (*node->mutable_attr())[key];
}

void tensor_to_proto(const Tensor& host, tf::TensorProto* proto) {
  proto->set_dtype(static_cast<tf::DataType>(host.dtype()));
  shape_to_proto(host.shape().dims(), proto->mutable_tensor_shape());
  if (host.dtype() == DType::kString) {
    for (const std::string& s : host.to_vector<std::string>()) proto->add_string_val(s);
  } else {
    proto->set_tensor_content(
        std::string(static_cast<const char*>(host.raw_data()), host.nbytes()));
  }
}

tf::NodeDef* add_const(tf::GraphDef* graph, const std::string& name, const Tensor& host,
                       const std::string& device) {
  tf::NodeDef* node = add_node(graph, name, "Const", {}, device);
  attr(node, "dtype").set_type(static_cast<tf::DataType>(host.dtype()));
  tensor_to_proto(host, attr(node, "value").mutable_tensor());
  return node;
}

}  // namespace varstate
