#include "daemon/pipeline/formats/parquet/schema.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace zephon::pipeline::parquet {
namespace {

// Schemas nest at most this deep (levels fit comfortably; a crafted schema cannot
// recurse the stack away).
constexpr int kMaxSchemaDepth = 64;

struct Node {
  const SchemaElement* element = nullptr;
  std::vector<Node> children;
  int first_leaf = 0;  // index of its first leaf column in depth-first order
};

// Builds the tree of the depth-first flattened schema starting at *pos.
absl::Status Build(const std::vector<SchemaElement>& schema, size_t* pos, int depth,
                   int* leaves, Node* node) {
  if (depth > kMaxSchemaDepth) {
    return absl::DataLossError(absl::StrCat("schema nests deeper than ", kMaxSchemaDepth));
  }
  if (*pos >= schema.size()) return absl::DataLossError("schema ends inside a group");
  node->element = &schema[(*pos)++];
  node->first_leaf = *leaves;
  const int n = node->element->num_children;
  if (n == 0 && depth > 0) {
    if (!node->element->type.has_value()) {
      return absl::DataLossError(
          absl::StrCat("schema leaf '", node->element->name, "' has no physical type"));
    }
    ++*leaves;
    return absl::OkStatus();
  }
  if (static_cast<size_t>(n) > schema.size() - *pos) {
    return absl::DataLossError(absl::StrCat("schema group '", node->element->name, "' claims ",
                                            n, " children, more than the schema holds"));
  }
  node->children.resize(n);
  for (int i = 0; i < n; ++i) {
    RETURN_IF_ERROR(Build(schema, pos, depth + 1, leaves, &node->children[i]));
  }
  return absl::OkStatus();
}

bool IsLeaf(const Node& n) { return n.children.empty() && n.element->type.has_value(); }

bool IsListGroup(const Node& n) {
  const SchemaElement& e = *n.element;
  return !IsLeaf(n) && (e.logical_list || e.converted_type == kConvertedList);
}

bool IsMapGroup(const Node& n) {
  const SchemaElement& e = *n.element;
  return !IsLeaf(n) && (e.logical_map || e.converted_type == kConvertedMap ||
                        e.converted_type == kConvertedMapKeyValue);
}

// The names a user can give `field=`: leaves and lists by dotted path.
void FieldNames(const Node& n, const std::string& prefix, std::vector<std::string>* out) {
  for (const Node& c : n.children) {
    std::string name = prefix.empty() ? c.element->name : absl::StrCat(prefix, ".", c.element->name);
    if (IsLeaf(c) || IsListGroup(c) || IsMapGroup(c) ||
        c.element->repetition == Repetition::kRepeated) {
      out->push_back(name);
    } else {
      FieldNames(c, name, out);
    }
  }
}

std::string Describe(const Node& n) {
  if (IsLeaf(n)) {
    const PhysicalType t = *n.element->type;
    if (t == PhysicalType::kByteArray) return "a string column (BYTE_ARRAY)";
    return absl::StrCat("a ", PhysicalTypeName(t), " column");
  }
  if (IsMapGroup(n)) return "a map column";
  if (IsListGroup(n)) return "a list column";
  return "a struct column";
}

void AddLevels(const SchemaElement& e, int* def, int* rep) {
  if (e.repetition == Repetition::kOptional) ++*def;
  if (e.repetition == Repetition::kRepeated) {
    ++*def;
    ++*rep;
  }
}

}  // namespace

absl::StatusOr<ColumnPlan> ResolveColumn(const FileMetaData& metadata,
                                         const RecordField& field) {
  Node root;
  size_t pos = 0;
  int leaves = 0;
  RETURN_IF_ERROR(Build(metadata.schema, &pos, 0, &leaves, &root));
  const bool tokens = field.kind == RecordField::Kind::kTokens;
  const std::string& name = field.name;

  const Node* node = &root;
  int def = 0, rep = 0;
  std::vector<std::string> path;
  // A top-level column whose name holds a dot is found by its whole name first.
  std::vector<std::string> parts = absl::StrSplit(name, '.');
  for (const Node& c : root.children) {
    if (c.element->name == name) parts = {name};
  }
  for (const std::string& part : parts) {
    const Node* next = nullptr;
    for (const Node& c : node->children) {
      if (c.element->name == part) next = &c;
    }
    if (next == nullptr || IsLeaf(*node)) {
      std::vector<std::string> names;
      FieldNames(root, "", &names);
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", name, "' is not a column of this Parquet file; its columns are: ",
          absl::StrJoin(names, ", ")));
    }
    node = next;
    path.push_back(node->element->name);
    AddLevels(*node->element, &def, &rep);
    if (!IsLeaf(*node) && (IsListGroup(*node) || IsMapGroup(*node))) break;
  }
  if (path.size() != parts.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "field '", name, "' reaches into '", absl::StrJoin(path, "."),
        "', which is a list or map column; name the list column itself"));
  }

  ColumnPlan plan;
  plan.kind = field.kind;
  const std::string fix_text =
      absl::StrCat("use tokenize(field='", name, "') to read text, or name a list<int> column");
  const std::string fix_tokens = absl::StrCat(
      "read it as token ids without tokenize (field='", name, "'), or name a string column");

  if (IsMapGroup(*node)) {
    return absl::InvalidArgumentError(absl::StrCat("field '", name, "' is ", Describe(*node),
                                                   ": name a string or list<int> column"));
  }
  const Node* leaf = nullptr;
  if (IsLeaf(*node) && node->element->repetition != Repetition::kRepeated) {
    if (rep > 0) {
      return absl::UnimplementedError(absl::StrCat(
          "field '", name, "' lies inside a repeated field; name a top-level or struct field"));
    }
    const PhysicalType t = *node->element->type;
    if (t == PhysicalType::kFixedLenByteArray) {
      return absl::UnimplementedError(absl::StrCat(
          "field '", name, "' is a FIXED_LEN_BYTE_ARRAY column, which this reader does not "
          "read: write it as a string (BYTE_ARRAY) column"));
    }
    if (t != PhysicalType::kByteArray) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", name, "' is ", Describe(*node), ", not text or a list of token ids: ",
          tokens ? "name a list<int32> or list<int64> column"
                 : "name a string column for tokenize(field=...)"));
    }
    if (tokens) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", name, "' is a string column: ", fix_text));
    }
    leaf = node;
  } else {
    // A list: the standard 3-level form (group (LIST) { repeated group list { element } }),
    // the legacy 2-level form (group (LIST) { repeated int32 element }), or a bare
    // repeated primitive.
    int list_def = 0;
    if (IsLeaf(*node)) {
      leaf = node;  // repeated primitive: def/rep already include it
      list_def = def;
    } else {
      const Node* repeated = nullptr;
      if (node->element->repetition == Repetition::kRepeated) {
        repeated = node;  // an unannotated repeated group
        list_def = def;
      } else if (node->children.size() == 1 &&
                 node->children[0].element->repetition == Repetition::kRepeated) {
        repeated = &node->children[0];
        AddLevels(*repeated->element, &def, &rep);
        list_def = def;
      }
      if (repeated == nullptr) {
        std::vector<std::string> names;
        FieldNames(*node, name, &names);
        return absl::InvalidArgumentError(absl::StrCat(
            "field '", name, "' is ", Describe(*node), " with fields ", absl::StrJoin(names, ", "),
            ": name one of them"));
      }
      const Node* element = repeated;
      // Descend through single-child groups to the element's leaf.
      while (!IsLeaf(*element)) {
        if (element->children.size() != 1 || IsListGroup(*element)) {
          return absl::UnimplementedError(absl::StrCat(
              "field '", name, "' is a list of structs, maps or lists; name a list<int32> "
              "or list<int64> column"));
        }
        if (element != repeated) AddLevels(*element->element, &def, &rep);
        element = &element->children[0];
        if (element->element->repetition == Repetition::kRepeated && element != repeated) {
          return absl::UnimplementedError(absl::StrCat(
              "field '", name, "' is a nested list; name a list<int32> or list<int64> column"));
        }
      }
      if (element != repeated) AddLevels(*element->element, &def, &rep);
      leaf = element;
    }
    if (rep != 1) {
      return absl::UnimplementedError(absl::StrCat(
          "field '", name, "' is a list inside a repeated field; name a top-level or struct "
          "list<int> column"));
    }
    const PhysicalType t = *leaf->element->type;
    if (t != PhysicalType::kInt32 && t != PhysicalType::kInt64) {
      // A list of strings is neither one text nor token ids: both fixes name another column.
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", name, "' is a list of ", PhysicalTypeName(t),
          tokens ? ", not of INT32 or INT64 token ids: name a list<int32> or list<int64> column"
                 : ", not text: name a string column for tokenize(field=...)"));
    }
    if (!tokens) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", name, "' is a list<", t == PhysicalType::kInt32 ? "int32" : "int64",
          "> column (token ids): ", fix_tokens));
    }
    plan.list_def = list_def;
  }
  plan.leaf_index = leaf->first_leaf;
  plan.type = *leaf->element->type;
  const std::optional<int32_t>& converted = leaf->element->converted_type;
  plan.unsigned_ints = converted.has_value() && *converted >= kConvertedUint8 &&
                       *converted <= kConvertedUint64;
  plan.max_def = def;
  plan.max_rep = rep;
  // The leaf's path_in_schema, for checking each row group's column chunk.
  const Node* walk = &root;
  while (walk != leaf) {
    const Node* next = nullptr;
    for (const Node& c : walk->children) {
      if (c.first_leaf <= leaf->first_leaf) next = &c;
    }
    walk = next;
    plan.path.push_back(walk->element->name);
  }
  return plan;
}

}  // namespace zephon::pipeline::parquet
