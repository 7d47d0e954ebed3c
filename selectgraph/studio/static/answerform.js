// selectgraph studio: a form for a question's answer, built from its response schema.
// A field per property: text, number, integer, true/false, a choice for an enum; a JSON
// box for anything nested. The server checks the answer against the schema (and the
// question's Pydantic model) and names each field it refuses; those names are shown
// beside the fields. Values are sent as typed (no checks here), so the server decides.
"use strict";

const sgAnswerForm = (() => {
  // A property's schema with $ref followed and Optional[...] (anyOf with null) unwrapped.
  function resolve(schema, root) {
    let found = schema || {};
    for (let depth = 0; depth < 10; depth += 1) {
      if (typeof found.$ref === "string" && found.$ref.startsWith("#/$defs/")) {
        const { $ref, ...rest } = found;
        found = { ...((root.$defs || {})[$ref.slice(8)] || {}), ...rest };
        continue;
      }
      const options = found.anyOf || found.oneOf;
      if (Array.isArray(options)) {
        const real = options.filter((o) => o.type !== "null");
        if (real.length === 1) {
          const { anyOf, oneOf, ...rest } = found;
          found = { ...rest, ...real[0], nullable: true };
          continue;
        }
      }
      if (Array.isArray(found.allOf) && found.allOf.length === 1) {
        const { allOf, ...rest } = found;
        found = { ...rest, ...allOf[0] };
        continue;
      }
      break;
    }
    return found;
  }

  function kindOf(schema) {
    if (Array.isArray(schema.enum)) return "enum";
    if (schema.const !== undefined) return "enum";
    let type = schema.type;
    if (Array.isArray(type)) {
      const real = type.filter((t) => t !== "null");
      type = real.length === 1 ? real[0] : null;
    }
    return ["string", "number", "integer", "boolean"].includes(type) ? type : "json";
  }

  function field(name, schema, required) {
    const kind = kindOf(schema);
    const box = document.createElement("div");
    box.className = "sg-field";
    box.dataset.field = name;
    box.dataset.kind = kind;
    const id = `sg-answer-${name || "value"}`;
    const label = document.createElement("label");
    label.htmlFor = id;
    const title = schema.title || name || "answer";
    const type = kind === "json" ? "JSON" : kind === "enum" ? "one of" : kind;
    label.textContent = `${title} (${type})${required ? " *" : ""}`;
    let input;
    if (kind === "enum") {
      input = document.createElement("select");
      const choices = Array.isArray(schema.enum) ? schema.enum : [schema.const];
      if (!required) input.appendChild(new Option("", ""));
      choices.forEach((choice, index) => {
        input.appendChild(new Option(typeof choice === "string" ? choice : JSON.stringify(choice), String(index)));
      });
      const at = choices.findIndex((c) => JSON.stringify(c) === JSON.stringify(schema.default));
      if (at >= 0) input.value = String(at);
      input.sgChoices = choices;
    } else if (kind === "boolean") {
      input = document.createElement("input");
      input.type = "checkbox";
      input.checked = schema.default === true;
    } else if (kind === "json") {
      input = document.createElement("textarea");
      input.rows = 3;
      if (schema.default !== undefined) input.value = JSON.stringify(schema.default, null, 2);
    } else {
      input = document.createElement("input");
      input.type = "text";
      input.autocomplete = "off";
      if (kind !== "string") input.inputMode = kind === "integer" ? "numeric" : "decimal";
      if (schema.default !== undefined && schema.default !== null) input.value = String(schema.default);
    }
    input.id = id;
    input.name = name;
    const help = document.createElement("small");
    help.className = "field-help";
    help.textContent = schema.description || "";
    const error = document.createElement("small");
    error.className = "field-error";
    box.append(label, input, help, error);
    box.sgRead = () => read(kind, input, required);
    return box;
  }

  // The field's value, or undefined to leave it out (an optional field left empty).
  function read(kind, input, required) {
    if (kind === "boolean") return input.checked;
    if (kind === "enum") return input.value === "" ? undefined : input.sgChoices[Number(input.value)];
    const text = input.value;
    if (text.trim() === "" && !required && kind !== "string") return undefined;
    if (text === "" && !required) return undefined;
    if (kind === "number" || kind === "integer") {
      const number = Number(text);
      return text.trim() !== "" && Number.isFinite(number) ? number : text; // the server names it
    }
    if (kind === "json") {
      try { return JSON.parse(text); } catch { return text; }
    }
    return text;
  }

  // Builds the form in ``container``; returns { value(), showErrors(errors) }.
  function build(container, schema) {
    container.textContent = "";
    const root = resolve(schema, schema);
    const required = new Set(root.required || []);
    const whole = !(root.type === "object" && root.properties);
    const fields = whole
      ? [field("", root, true)]
      : Object.entries(root.properties).map(([name, sub]) => field(name, resolve(sub, schema), required.has(name)));
    container.append(...fields);
    return {
      value() {
        if (whole) return fields[0].sgRead();
        const answer = {};
        for (const box of fields) {
          const value = box.sgRead();
          if (value !== undefined) answer[box.dataset.field] = value;
        }
        return answer;
      },
      showErrors(errors) {
        for (const box of fields) {
          box.querySelector(".field-error").textContent = "";
          box.removeAttribute("data-invalid");
        }
        for (const [path, message] of Object.entries(errors || {})) {
          const name = whole ? "" : path.split(/[.[]/)[0];
          const box = fields.find((b) => b.dataset.field === name);
          if (!box) continue;
          box.dataset.invalid = "true";
          const note = box.querySelector(".field-error");
          note.textContent = [note.textContent, `${path || "the answer"}: ${message}`].filter(Boolean).join("; ");
        }
      },
    };
  }

  return { build };
})();
