# -DFISH_SANITIZE=ON: AddressSanitizer + UndefinedBehaviorSanitizer for everything
# (CI builds the GGUF corruption corpus test this way).
if(FISH_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
