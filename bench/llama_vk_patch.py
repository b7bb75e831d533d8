#!/usr/bin/python3
# llama_vk_patch.py SRC: two guards llama_build.sh (LLAMA_VULKAN=1) applies to llama.cpp de3ff815's
# ggml-vulkan so it builds with Debian 12's Vulkan SDK parts (glslc of shaderc 2023.2 / glslang
# 11.13, Vulkan headers 1.3.239). Both are no-ops with newer tools; idempotent (marker lines).
# 1. vulkan-shaders-gen compiles the Intel-Xe flash-attention decode shaders
#    (flash_attn_decode_phase_{1,2}.comp -> fa_decode_ph{1,2}_cm1) with coopmat unconditionally;
#    this glslc lacks GL_KHR_cooperative_matrix ("'coopmat' : undeclared identifier"). Guarded
#    on the extension's predefined macro, which glslang defines only where it supports it: an
#    empty kernel otherwise (the pipeline is created for Intel Xe devices only, and flash
#    attention is off in check_vk_llama.sh anyway).
# 2. ggml_vk_instance_init chains vk::LayerSettingsCreateInfoEXT (VK_EXT_layer_settings, absent
#    from the 1.3.239 headers: "'LayerSettingEXT' is not a member of 'vk'"); it only configures
#    the validation layer's best-practice checks. Guarded on VK_EXT_layer_settings.
import sys

src = sys.argv[1]
sh = f"{src}/ggml/src/ggml-vulkan/vulkan-shaders"
MARK1 = "// glint: stub without GL_KHR_cooperative_matrix"
for p in (f"{sh}/flash_attn_decode_phase_1.comp", f"{sh}/flash_attn_decode_phase_2.comp"):
    s = open(p).read()
    if MARK1 in s:
        continue
    lines = s.split("\n")
    assert lines[0].startswith("#version"), p
    out = [lines[0], MARK1, "#ifndef GL_KHR_cooperative_matrix",
           "layout(local_size_x = 1, local_size_y = 1, local_size_z = 1) in;",
           "void main() {}", "#else"] + lines[1:] + ["#endif", ""]
    open(p, "w").write("\n".join(out))

p = f"{src}/ggml/src/ggml-vulkan/ggml-vulkan.cpp"
s = open(p).read()
MARK2 = "// glint: VK_EXT_layer_settings guard"
if MARK2 not in s:
    a = "    VkBool32 enable_best_practice = layer_settings;\n"
    b = ("    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, "
         "layers, extensions, &layer_setting_info);\n")
    i, j = s.index(a), s.index(b) + len(b)
    s = (s[:i] + MARK2 + "\n#ifdef VK_EXT_layer_settings\n" + s[i:j] + "#else\n"
         "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, "
         "layers, extensions);\n#endif\n" + s[j:])
    open(p, "w").write(s)
