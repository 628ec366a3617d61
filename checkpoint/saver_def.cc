// SaverDef to and from TensorFlow's SaverDef proto.
#include "varstate/saver.h"

#include "proto/saver.pb.h"
#include "varstate/error.h"

namespace varstate {

std::string SaverDef::serialize() const {
  tf::SaverDef def;
  def.set_filename_tensor_name(filename_tensor_name);
  def.set_save_tensor_name(save_tensor_name);
  def.set_restore_op_name(restore_op_name);
  def.set_max_to_keep(max_to_keep);
  def.set_sharded(sharded);
  def.set_keep_checkpoint_every_n_hours(keep_checkpoint_every_n_hours);
  def.set_version(static_cast<tf::SaverDef::CheckpointFormatVersion>(version));
  return def.SerializeAsString();
}

SaverDef SaverDef::parse(const std::string& bytes) {
  tf::SaverDef def;
  if (!def.ParseFromString(bytes)) {
    throw InvalidArgumentError("cannot parse a SaverDef from " + std::to_string(bytes.size()) +
                               " bytes");
  }
  SaverDef out;
  out.filename_tensor_name = def.filename_tensor_name();
  out.save_tensor_name = def.save_tensor_name();
  out.restore_op_name = def.restore_op_name();
  out.max_to_keep = def.max_to_keep();
  out.sharded = def.sharded();
  out.keep_checkpoint_every_n_hours = def.keep_checkpoint_every_n_hours();
  out.version = static_cast<CheckpointFormatVersion>(def.version());
  return out;
}

}  // namespace varstate
